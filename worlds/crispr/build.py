"""CRISPR track: pooled CRISPR-knockout screens built from the real MAGeCK demo count table.

Substrate (real data, no network)
---------------------------------
`package_file("mageck2", "count_table.txt")` is tests/data/count_table.txt of the mageck2 0.3.0 sdist (the MAGeCK
demo): 999 sgRNAs of 100 genes (A1CF ... AHRR, 9-10 guides each; the guide ID carries the gene, the strand (m/p)
and the cut-site coordinate), read counts in four samples: HL60.initial, KBM7.initial, HL60.final, KBM7.final
(a genome-wide negative-selection screen in two leukaemia lines, Wang et al. 2014 Science 343:80; the demo keeps a
100-gene slice). The substrate calibrates, per cell line, from these real counts:

  size factors      MAGeCK median-ratio normalisation over the four samples;
  guide LFC L_i     log2((final_i/s_f + 1) / (initial_i/s_i + 1));
  gene effect m_g   the median guide LFC of each gene (real dependencies: ACTR8, AATF, ACIN1, ACLY ...; ABL1 only in
                    the BCR-ABL1+ line KBM7);
  residuals r_i     L_i - m_g: the real guide-to-guide and drift noise around each gene's effect;
  strong pool       the guide LFCs of the line's 5 most depleted genes (what a strong dependency looks like here);
  initial pool      the real initial counts (the library's representation).

What the real table lacks is added by documented, seeded models calibrated on it:
  non-targeting controls  "NonTargeting" guides NT_0001...: initial abundance bootstrapped from the initial pool
                    (L1: as a real guide's pair of lines, one plasmid pool),
                    effect 0, noise bootstrapped from the residuals;
  positive controls       guides against textbook core-essential genes (PCNA, POLR2A, RPA1, RPL5, RPS6, PSMA1,
                    SF3B1, SNRPD1; Hart et al. 2015 Cell 163:1515 reference set), guide IDs <GENE>_pc<k>; guide
                    effects bootstrapped from the strong pool;
  copy number       gene-level absolute copy number of each line (copy_number.csv): CN 2 for most genes, drawn
                    low-level gains (CN 3-4) and, where a world needs it, a high-level amplicon; guides cutting an
                    amplified locus deplete by DNA-damage toxicity, -gamma * (CN - 2) log2 units (Aguirre et al. 2016
                    Cancer Discov 6:914; Munoz et al. 2016 Cancer Discov 6:900), gamma drawn.

Two kinds of world data
-----------------------
L1 (integrity) worlds keep the real counts: the 999 real guides of all four samples, each column binomially thinned
to a drawn retention, plus the controls above (counts drawn from the models, then thinned alike). Recipes edit the
written table (see below).

L2 worlds are screens simulated from the calibrated model of one or two lines (recipe `simulate`):
  initial abundance a0_i = the real initial count of guide i (0 -> 0.5);
  gene effects  m_g soft-thresholded at 0.35 (smaller real medians are within the noise of 10 guides) and divided by
                the line's dynamic range (median of the strong pool) times a common drawn range, so two lines are
                comparable; plus a drawn set of extra dependencies with effects like the strong pool;
  replicate r   L_ir = effect_i + s * e_ir, e_ir bootstrapped from the real residuals (independent per biological
                replicate; one draw shared by all technical replicates), s drawn;
  sequencing    counts ~ Multinomial(depth, a0 * 2^L / sum) per sample, depth = n_guides x drawn reads per guide.
Modifiers (set before `simulate`): `extra_dependencies`, `strong_depletion` (a large drawn share of genes becomes a
dependency: a focused library), `amplicon` (CN 8-14 for drawn genes), `low_representation` (drawn genes whose guides
are under-represented in the library and drift out by bottleneck), `screen_strength` (one line screened longer: all
its effects scaled), `drug_arm` (vehicle + drug arms: resistance genes enriched in drug only, optionally sensitisers
depleted in drug only, and proliferation suppressors enriched in both arms).

Recipes (registered as "crispr.<name>")
---------------------------------------
L1  real_counts(retention, drop_genes, n_nt)   the real table, per-column binomial thinning, controls added
    thin_sample(sample, retention)             one sample thinned (a failed, shallow sample)
    transduction_bottleneck(lines, cells_per_guide, clone_sigma)  too few transduced cells: Poisson cells per sgRNA,
                                               log-normal clone sizes; every sample of the line inherits the skew
    swap_columns(line)                         that line's initial and final columns exchanged
    duplicate_rows(n)                          n rows written twice
    normalise_rpm(scale)                       every column rescaled to sum to `scale` (reads per million)
    mislabel_genes(n)                          n sgRNAs carry another gene in the count table (library.csv is right)
    truncate(keep_fraction)                    the sorted table cut after that share of rows, the next row cut in half
L2  choose_lines(lines, dynamic_range, gains, n_nt, shared_base, clip_positive) | extra_dependencies(n, lines)
    | strong_depletion(fraction, arm) | amplicon(n_genes, copy_number, gamma, line) | cutting_toxicity(gamma)
    | low_representation(n_genes, share, guides_low, bottleneck, line) | screen_strength(line, factor)
    | drug_arm(n_resistance, n_proliferation) | simulate(replicates, technical, noise, reads_per_guide, drop_genes)
    | set_task(kind, ...)
L2 guide-level family (one line, a 4-sgRNA library, plasmid + T0 + endpoint replicates, expression.csv and the
    library's perfect_matches column): choose_lines | extra_dependencies
    | guide_design(guides_per_gene, off_share, n_scatter, gamma_multi, cells_per_guide, clone_sigma)
    | single_guide_outliers(n_genes) | multi_locus(n_genes) | non_expressed_depletion(n_genes)
    | simulate_guides(replicates, noise, reads_per_guide) | set_task(kind="guide_level", cell_line)
    The plasmid holds the real initial abundances; the transduction (Poisson cells per sgRNA, log-normal clone sizes)
    skews T0 and every endpoint flask alike, so endpoint vs T0 cancels it and endpoint vs plasmid does not; sgRNAs with
    k perfect-match sites deplete by -gamma_multi x (k - 1) (multi-cut toxicity, Aguirre et al. 2016); an outlier sgRNA
    or a gene-independent artefact on a non-expressed gene is added to the effect, never to the generative truth.
L3  inject_l3_expression(line, genes, retention)  injected counterfactual: real final counts of `genes` in `line`
                                                binomially thinned (counts only go down)
    dossier(kind)                              gene-level evidence tables computed from the (edited) real table by
                                                the reference analysis (median-ratio size factors, median sgRNA LFC,
                                                Mann-Whitney against all other sgRNAs, BH)
Every written file goes through the canonical writer: counts.txt (MAGeCK count layout), library.csv, meta.json and,
for essential/selective screens, copy_number.csv; rows sorted by sgRNA ID so no position encodes an edit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.stats import false_discovery_control
import pandas as pd

from benchmark.suite.canonical import CanonicalWriter
from benchmark.suite.registry import recipe, substrate, writer

TRACK = "crispr"
LINES = ("HL60", "KBM7")
POSITIVE_CONTROLS = ("PCNA", "POLR2A", "RPA1", "RPL5", "RPS6", "PSMA1", "SF3B1", "SNRPD1")
GUIDES_PER_PC = 4
SOFT_THRESHOLD = 0.35


@dataclass
class Screen:
    guides: pd.DataFrame                      # sgRNA, gene, category (targeting / non_targeting / positive_control)
    samples: list[dict]                       # name, cell_line, condition, replicate
    counts: np.ndarray                        # guides x samples
    integer: bool = True
    table_gene: list[str] | None = None       # the Gene column of the count table (None: the library gene)
    library_rows: pd.DataFrame | None = None  # library.csv as written (None: from guides)
    dup_rows: list[int] = field(default_factory=list)
    truncate_at: int | None = None            # number of complete data rows kept (the next row is cut mid-line)
    copy_number: pd.DataFrame | None = None   # cell_line, gene, copy_number
    task: dict = field(default_factory=dict)
    dossier: dict | None = None
    model: dict = field(default_factory=dict)  # L2 design (modifiers write, simulate reads)
    expression: pd.DataFrame | None = None    # gene, tpm (guide-level worlds: the screened line's RNA-seq)


# ---------------------------------------------------------------- substrate

def _median_ratio(c: np.ndarray) -> np.ndarray:
    ok = (c > 0).all(1)
    lg = np.log(c[ok])
    return np.exp(np.median(lg - lg.mean(1, keepdims=True), axis=0))


@substrate("mageck_demo_counts")
def mageck_demo(seed: int = 0) -> dict:
    from benchmark.suite.package_data import package_file

    tab = pd.read_csv(package_file("mageck2", "count_table.txt"), sep="\t")
    cols = ["HL60.initial", "KBM7.initial", "HL60.final", "KBM7.final"]
    c = tab[cols].to_numpy(np.float64)
    sf = _median_ratio(c)
    norm = c / sf
    genes = tab["Gene"].to_numpy()
    cal = {}
    for line in LINES:
        i, f = cols.index(f"{line}.initial"), cols.index(f"{line}.final")
        L = np.log2((norm[:, f] + 1) / (norm[:, i] + 1))
        m = pd.Series(L).groupby(genes).median()
        resid = L - m.reindex(genes).to_numpy()
        strong_genes = m.sort_values().index[:5]
        strong = L[np.isin(genes, strong_genes)]
        cal[line] = {"L": L, "gene_effect": m, "resid": resid, "strong": strong[strong < -0.5],
                     "initial": c[:, i], "final": c[:, f], "ratio": float(sf[f] / sf[i])}
    return {"table": tab, "cols": cols, "cal": cal, "genes": sorted(set(genes))}


# ---------------------------------------------------------------- helpers

def _controls(rng, n_nt: int) -> pd.DataFrame:
    rows = [{"sgRNA": f"NT_{k + 1:04d}", "gene": "NonTargeting", "category": "non_targeting"} for k in range(n_nt)]
    for g in POSITIVE_CONTROLS:
        rows += [{"sgRNA": f"{g}_pc{k + 1}", "gene": g, "category": "positive_control"} for k in range(GUIDES_PER_PC)]
    return pd.DataFrame(rows)


def _boot(rng, pool: np.ndarray, n: int) -> np.ndarray:
    return np.asarray(pool)[rng.integers(0, len(pool), n)]


def _thin(rng, x: np.ndarray, p) -> np.ndarray:
    return rng.binomial(np.rint(x).astype(np.int64), np.clip(p, 0, 1)).astype(np.float64)


# ---------------------------------------------------------------- L1 recipes

@recipe(TRACK, "real_counts", version="2")
def real_counts(sub: dict, rng, retention: list | float, drop_genes: int = 0, n_nt: int = 50) -> Screen:
    """The real table (999 guides x 4 samples), each column thinned to its drawn retention; `drop_genes` random genes
    left out of the library; controls added from the models (see the module docstring). Every line is transduced from
    one plasmid pool, so a control's initial abundance is drawn once, as a real guide's (HL60, KBM7) pair: the controls'
    initial counts agree between the lines as the targeting guides' do (drawn per line, they did not: Spearman 0.00
    against 0.77, which a blind analyst flagged)."""
    tab, cols, cal = sub["table"], sub["cols"], sub["cal"]
    ret = list(retention) if isinstance(retention, (list, tuple)) else [retention] * 4
    drop = set(rng.choice(sub["genes"], drop_genes, replace=False)) if drop_genes else set()
    keep = ~tab["Gene"].isin(drop).to_numpy()
    guides = pd.DataFrame({"sgRNA": tab["sgRNA"][keep], "gene": tab["Gene"][keep], "category": "targeting"})
    counts = tab[cols].to_numpy(np.float64)[keep]
    ctrl = _controls(rng, n_nt)
    nt = ctrl["category"].eq("non_targeting").to_numpy()
    cc = np.zeros((len(ctrl), 4))
    pair = rng.integers(0, len(cal[LINES[0]]["initial"]), len(ctrl))  # one plasmid pool: the same real guide's pair
    for line in LINES:
        c = cal[line]
        a0 = np.asarray(c["initial"])[pair]
        eff = np.where(nt, 0.0, _boot(rng, c["strong"], len(ctrl)))
        lfc = eff + _boot(rng, c["resid"], len(ctrl)) * 0.8
        cc[:, cols.index(f"{line}.initial")] = rng.poisson(a0)
        cc[:, cols.index(f"{line}.final")] = rng.poisson(a0 * c["ratio"] * 2.0 ** lfc)
    guides = pd.concat([guides, ctrl], ignore_index=True)
    counts = np.vstack([counts, cc])
    for j in range(4):
        counts[:, j] = _thin(rng, counts[:, j], ret[j])
    samples = [{"name": n, "cell_line": n.split(".")[0], "condition": n.split(".")[1], "replicate": 1} for n in cols]
    order = np.argsort(guides["sgRNA"].to_numpy(), kind="stable")
    return Screen(guides=guides.iloc[order].reset_index(drop=True), samples=samples, counts=counts[order])


def _col(data: Screen, name: str) -> int:
    return [s["name"] for s in data.samples].index(name)


@recipe(TRACK, "thin_sample")
def thin_sample(data: Screen, rng, sample: str, retention: float) -> Screen:
    j = _col(data, sample)
    data.counts[:, j] = _thin(rng, data.counts[:, j], retention)
    return data


@recipe(TRACK, "transduction_bottleneck")
def transduction_bottleneck(data: Screen, rng, lines: list[str], cells_per_guide: float, clone_sigma: float) -> Screen:
    """A bottleneck at transduction (too few infected cells for the library): for each listed line, the number of
    transduced cells carrying sgRNA i is Poisson(cells_per_guide x its share of the library x n_guides); each cell
    founds a clone of log-normal size (sd `clone_sigma`, natural log). The screen population descends from these
    clones, so EVERY sample of the line (initial and final) inherits the same skewed representation: guide i's
    abundance in each sample is multiplied by (its clones' total size / the expectation), and sgRNAs that reached no
    cell are absent throughout. Each sample is then re-sequenced (Poisson) at its own total read count, so depths stay
    as delivered."""
    for line in lines:
        cols = [j for j, s in enumerate(data.samples) if s["cell_line"] == line]
        ini = [j for j in cols if data.samples[j]["condition"] == "initial"]
        a = np.maximum(data.counts[:, ini].mean(1), 0.5)
        lam = cells_per_guide * a / a.mean()
        cells = rng.poisson(lam)
        sizes = np.exp(clone_sigma * rng.standard_normal(int(cells.sum())))
        owner = np.repeat(np.arange(len(cells)), cells)
        clone = np.bincount(owner, weights=sizes, minlength=len(cells))
        factor = clone / (lam * np.exp(clone_sigma ** 2 / 2))
        for j in cols:
            x = data.counts[:, j] * factor
            data.counts[:, j] = rng.poisson(x / x.sum() * data.counts[:, j].sum())
    return data


@recipe(TRACK, "swap_columns")
def swap_columns(data: Screen, rng, line: str) -> Screen:
    i, f = _col(data, f"{line}.initial"), _col(data, f"{line}.final")
    data.counts[:, [i, f]] = data.counts[:, [f, i]]
    return data


@recipe(TRACK, "duplicate_rows")
def duplicate_rows(data: Screen, rng, n: int) -> Screen:
    data.dup_rows = sorted(int(i) for i in rng.choice(len(data.counts), n, replace=False))
    return data


@recipe(TRACK, "normalise_rpm")
def normalise_rpm(data: Screen, rng, scale: float = 1e6) -> Screen:
    data.counts = data.counts / data.counts.sum(0, keepdims=True) * scale
    data.integer = False
    return data


@recipe(TRACK, "mislabel_genes")
def mislabel_genes(data: Screen, rng, n: int) -> Screen:
    """n targeting guides get another (random) library gene in the count table's Gene column (a merge on row order
    after the library was re-sorted); library.csv keeps the right gene."""
    tg = np.flatnonzero(data.guides["category"].eq("targeting").to_numpy())
    rows = rng.choice(tg, n, replace=False)
    genes = sorted(set(data.guides["gene"].iloc[tg]))
    col = list(data.guides["gene"])
    for r in rows:
        col[r] = str(rng.choice([g for g in genes if g != col[r]]))
    data.table_gene = col
    return data


@recipe(TRACK, "truncate")
def truncate(data: Screen, rng, keep_fraction: float) -> Screen:
    data.truncate_at = int(round(keep_fraction * len(data.counts)))
    return data


# ---------------------------------------------------------------- L2 recipes (design modifiers, then simulate)

@recipe(TRACK, "choose_lines")
def choose_lines(sub: dict, rng, lines: list[str], dynamic_range: float, gains: int = 6, n_nt: int = 60,
                 shared_base: bool = False, clip_positive: bool = False) -> Screen:
    """Start an L2 design: the line(s) screened, a common dynamic range (median LFC of a strong dependency after the
    screen) and `gains` genes per line with a low-level gain (CN 3-4). `shared_base`: every gene gets the mean of the
    lines' (scaled) real effects in both lines, except ABL1, which keeps its real line-specific effect (KBM7 carries
    BCR-ABL1); the other real line differences of this 10-guide slice are within noise. `clip_positive`: real positive
    (enrichment) effects are set to 0 (drug screens: proliferation advantages are added only where a world says so)."""
    genes = list(sub["genes"])
    cn = []
    for line in lines:
        g = set(rng.choice(genes, gains, replace=False)) if gains else set()
        cn += [{"cell_line": line, "gene": x, "copy_number": int(rng.integers(3, 5)) if x in g else 2} for x in genes]
    design = {"sub": sub, "lines": list(lines), "range": float(dynamic_range), "n_nt": int(n_nt),
              "extra": {ln: {} for ln in lines}, "scale": {ln: 1.0 for ln in lines}, "low_rep": [],
              "gamma": 0.0, "arms": None, "shared_base": bool(shared_base), "low_lines": list(lines),
              "clip_positive": bool(clip_positive)}
    return Screen(guides=pd.DataFrame(), samples=[], counts=np.zeros((0, 0)), copy_number=pd.DataFrame(cn),
                  model=design)


def _strong_effect(rng, cal: dict, rng_range: float, n: int) -> np.ndarray:
    """Gene-level effects like the line's strongest real dependencies, on the common dynamic range."""
    med = float(np.median(cal["strong"]))
    return np.array([-float(np.median(_boot(rng, cal["strong"], 10))) / med * rng_range * rng.uniform(0.8, 1.3)
                     for _ in range(n)])


@recipe(TRACK, "extra_dependencies")
def extra_dependencies(data: Screen, rng, n: int, lines: list[str] | None = None, shared: bool = True) -> Screen:
    """n drawn genes (real effect ~0 in the line(s)) become dependencies like the strongest real ones; `shared`: the
    same genes and effects in every listed line, else each line its own."""
    d = data.model
    lines = lines or d["lines"]
    free = _free_genes(d, lines)
    pick = list(rng.choice(free, n, replace=False))
    eff = _strong_effect(rng, d["sub"]["cal"][lines[0]], d["range"], n)
    for ln in lines:
        for g, e in zip(pick, eff):
            d["extra"][ln][g] = float(e)
    d.setdefault("injected", {}).setdefault(",".join(lines), []).extend(pick)
    return data


def _free_genes(d: dict, lines: list[str]) -> list[str]:
    out = []
    taken = set(d["low_rep"]) | set(d.get("resistance", {})) | set(d.get("proliferation", {})) | set(d.get("drug_extra", {}))
    taken |= set(d.get("amplified", []))
    for g in d["sub"]["genes"]:
        if g in taken or any(g in d["extra"][ln] for ln in d["lines"]):
            continue
        if all(abs(_base_effect(d, ln, g)) == 0 for ln in d["lines"]):
            out.append(g)
    return out


def _base_effect(d: dict, line: str, gene: str) -> float:
    if d.get("shared_base") and gene != "ABL1":
        e = float(np.mean([_line_effect(d, ln, gene) for ln in LINES]))
    else:
        e = _line_effect(d, line, gene)
    return min(e, 0.0) if d.get("clip_positive") else e


def _line_effect(d: dict, line: str, gene: str) -> float:
    cal = d["sub"]["cal"][line]
    m = float(cal["gene_effect"][gene])
    m = np.sign(m) * max(abs(m) - SOFT_THRESHOLD, 0.0)
    return float(m / abs(np.median(cal["strong"])) * d["range"])


@recipe(TRACK, "strong_depletion")
def strong_depletion(data: Screen, rng, fraction: float, arm: str | None = None) -> Screen:
    """A focused library: a drawn `fraction` of the (free) genes are dependencies of the first line (or, with arm='drug',
    sensitisers depleted in the drug arm only)."""
    d = data.model
    free = _free_genes(d, d["lines"])
    n = int(round(fraction * len(d["sub"]["genes"])))
    pick = list(rng.choice(free, min(n, len(free)), replace=False))
    eff = _strong_effect(rng, d["sub"]["cal"][d["lines"][0]], d["range"], len(pick))
    if arm == "drug":
        d.setdefault("drug_extra", {}).update({g: float(e) for g, e in zip(pick, eff)})
    else:
        for g, e in zip(pick, eff):
            d["extra"][d["lines"][0]][g] = float(e)
    return data


@recipe(TRACK, "amplicon")
def amplicon(data: Screen, rng, n_genes: int, copy_number: int, gamma: float, line: str | None = None) -> Screen:
    d = data.model
    line = line or d["lines"][-1]
    free = _free_genes(d, d["lines"])
    pick = set(rng.choice(free, n_genes, replace=False))
    cn = data.copy_number
    m = (cn["cell_line"] == line) & cn["gene"].isin(pick)
    cn.loc[m, "copy_number"] = [int(copy_number + rng.integers(-1, 2)) for _ in range(int(m.sum()))]
    d["amplified"] = sorted(pick)
    d["gamma"] = float(gamma)
    return data


@recipe(TRACK, "cutting_toxicity")
def cutting_toxicity(data: Screen, rng, gamma: float) -> Screen:
    data.model["gamma"] = float(gamma)
    return data


@recipe(TRACK, "low_representation")
def low_representation(data: Screen, rng, n_genes: int, share: float, guides_low: int, bottleneck: float,
                       line: str | None = None) -> Screen:
    """n_genes drawn genes have `guides_low` of their guides under-represented in the library (abundance x `share`,
    e.g. GC-extreme guides lost in synthesis and cloning); such guides are carried by few cells and drift out during
    the screen: their final abundance is multiplied by Poisson(bottleneck)/bottleneck per biological replicate.
    `line`: only that line went through the bottleneck (transduced at low coverage); the others keep representation."""
    d = data.model
    if line:
        d["low_lines"] = [line]
    free = _free_genes(d, d["lines"])
    d["low_rep"] = list(rng.choice(free, n_genes, replace=False))
    d["low_share"], d["low_guides"], d["bottleneck"] = float(share), int(guides_low), float(bottleneck)
    return data


@recipe(TRACK, "screen_strength")
def screen_strength(data: Screen, rng, line: str, factor: float) -> Screen:
    data.model["scale"][line] = float(factor)
    return data


@recipe(TRACK, "drug_arm")
def drug_arm(data: Screen, rng, n_resistance: int, n_proliferation: int = 0, resistance: tuple = (1.5, 3.0),
             proliferation: tuple = (1.5, 2.5)) -> Screen:
    """Vehicle and drug arms from one initial sample: `n_resistance` drawn genes enriched in the drug arm only,
    `n_proliferation` drawn genes enriched in both arms (knockouts that proliferate faster, drug or not)."""
    d = data.model
    free = _free_genes(d, d["lines"])
    free = [g for g in free if g not in d.get("drug_extra", {})]
    pick = list(rng.choice(free, n_resistance + n_proliferation, replace=False))
    d["resistance"] = {g: float(rng.uniform(*resistance)) for g in pick[:n_resistance]}
    d["proliferation"] = {g: float(rng.uniform(*proliferation)) for g in pick[n_resistance:]}
    d["arms"] = ["vehicle", "drug"]
    return data


@recipe(TRACK, "simulate")
def simulate(data: Screen, rng, replicates: int, technical: bool, noise: float, reads_per_guide: list,
             drop_genes: int = 0) -> Screen:
    d = data.model
    sub = d["sub"]
    tab = sub["table"]
    drop = set(rng.choice(_free_genes(d, d["lines"]), drop_genes, replace=False)) if drop_genes else set()
    keep = ~tab["Gene"].isin(drop).to_numpy()
    g_t = tab["Gene"].to_numpy()[keep]
    ctrl = _controls(rng, d["n_nt"])
    guides = pd.concat([pd.DataFrame({"sgRNA": tab["sgRNA"][keep], "gene": g_t, "category": "targeting"}), ctrl],
                       ignore_index=True)
    n = len(guides)
    cat = guides["category"].to_numpy()
    gene = guides["gene"].to_numpy()
    arms = d["arms"] or ["final"]
    # initial abundance: the first line's real initial counts (one library for every line and arm)
    cal0 = sub["cal"][d["lines"][0]]
    a0 = np.concatenate([np.maximum(cal0["initial"][keep], 0.5), _boot(rng, cal0["initial"], len(ctrl))])
    a0 = np.maximum(a0, 0.5)
    low = np.zeros(n, bool)
    for g in d["low_rep"]:
        idx = np.flatnonzero(gene == g)
        sel = rng.choice(idx, min(d["low_guides"], len(idx)), replace=False)
        low[sel] = True
        a0[sel] = a0[sel] * d["low_share"] * rng.uniform(0.5, 1.5, len(sel))
    samples, cols = [], []
    rpg = list(reads_per_guide)
    samples.append({"name": f"{'_'.join(d['lines'])}.initial" if len(d["lines"]) > 1 else f"{d['lines'][0]}.initial",
                    "cell_line": ",".join(d["lines"]), "condition": "initial", "replicate": 1})
    cols.append(rng.multinomial(int(rpg[0] * n), a0 / a0.sum()))
    k = 1
    truth = {}
    for line in d["lines"]:
        cal = sub["cal"][line]
        base = np.array([_base_effect(d, line, g) if c == "targeting" else 0.0 for g, c in zip(gene, cat)])
        for g, e in d["extra"][line].items():
            base[gene == g] = e
        pc = cat == "positive_control"
        if "pc_effect" not in d:  # core essentials: one draw, shared by every line of the world
            d["pc_effect"] = _boot(rng, cal["strong"], int(pc.sum())) / abs(np.median(cal["strong"])) * d["range"]
        base[pc] = d["pc_effect"]
        cn = data.copy_number
        cnl = dict(zip(cn[cn["cell_line"] == line]["gene"], cn[cn["cell_line"] == line]["copy_number"]))
        cut = np.array([-d["gamma"] * max(cnl.get(g, 2) - 2, 0) if c == "targeting" else 0.0 for g, c in zip(gene, cat)])
        truth[line] = base
        tg = cat == "targeting"
        d.setdefault("true_effect", {})[line] = {str(g): round(float(e) * d["scale"][line], 4)
                                                 for g, e in zip(gene[tg], base[tg])}
        for arm in arms:
            eff = base.copy()
            if arm in ("vehicle", "drug"):
                for g, e in d["proliferation"].items():
                    eff[gene == g] += e
            if arm == "drug":
                for g, e in d["resistance"].items():
                    eff[gene == g] += e
                for g, e in d.get("drug_extra", {}).items():
                    eff[gene == g] += e
            eff = eff * d["scale"][line] + cut
            shared = _boot(rng, cal["resid"], n)
            for r in range(replicates):
                e = shared if technical else _boot(rng, cal["resid"], n)
                a = a0 * 2.0 ** (eff + noise * e)
                if low.any() and line in d["low_lines"]:
                    bn = d["bottleneck"]
                    if technical and r > 0:
                        a[low] = a_low_prev
                    else:
                        a[low] = a[low] * rng.poisson(bn, int(low.sum())) / bn
                        a_low_prev = a[low].copy()
                depth = int(rpg[k % len(rpg)] * n)
                k += 1
                cols.append(rng.multinomial(depth, a / a.sum()))
                samples.append({"name": f"{line}.{arm}.R{r + 1}", "cell_line": line, "condition": arm,
                                "replicate": r + 1})
    order = np.argsort(guides["sgRNA"].to_numpy(), kind="stable")
    data.guides = guides.iloc[order].reset_index(drop=True)
    data.counts = np.column_stack(cols).astype(np.float64)[order]
    data.samples = samples
    return data


@recipe(TRACK, "set_task")
def set_task(data: Screen, rng, kind: str, **task) -> Screen:
    """The task block of meta.json; drug-resistance screens ship no copy-number table (drug vs vehicle cancels it)."""
    data.task = {"kind": kind, **task}
    if kind == "resistance":
        data.copy_number = None
    return data


# ---------------------------------------------------------------- L2 guide-level family (4 sgRNAs per gene)

GUIDE_NOTES = {
    "plasmid": "the sgRNA library plasmid DNA, sequenced before lentiviral packaging and transduction",
    "initial": "T0: the transduced cells after puromycin selection, at the start of the proliferation screen",
    "final": "the end of the screen (about 14 population doublings after T0), replicate flasks split at T0",
}


def _guide_taken(d: dict) -> set:
    return set(d.get("guide_taken", []))


def _guide_free(d: dict) -> list[str]:
    return [g for g in _free_genes(d, d["lines"]) if g not in _guide_taken(d)]


@recipe(TRACK, "guide_design")
def guide_design(data: Screen, rng, guides_per_gene: int, off_share: float, n_scatter: int, gamma_multi: float,
                 cells_per_guide: float, clone_sigma: float) -> Screen:
    """The guide-level design shared by every world of the family: a `guides_per_gene` library (the first drawn
    guides of each gene's real sgRNAs: a Brunello-like 4-guide library); RNA-seq expression of the line (a drawn share
    `off_share` of the neutral genes not expressed, TPM 0-0.6; every other gene log-normal, TPM >= 2.8); `n_scatter`
    sgRNAs of different genes annotated with 2 perfect-match sites (they cut twice); per-extra-site cutting toxicity
    `gamma_multi` log2; the transduction of the library into cells at `cells_per_guide` transduced cells per sgRNA with
    log-normal clone sizes (sd `clone_sigma`), the skew every T0 and final sample inherits and the plasmid lacks."""
    d = data.model
    tab = d["sub"]["table"]
    pick = []
    for g, sub in tab.groupby("Gene", sort=True):
        ids = sorted(sub["sgRNA"])
        pick += list(rng.choice(ids, min(guides_per_gene, len(ids)), replace=False))
    d["guide_ids"] = sorted(str(x) for x in pick)
    free = _guide_free(d)
    n_off = int(round(off_share * len(free)))
    off = sorted(rng.choice(free, n_off, replace=False))
    genes = list(d["sub"]["genes"])
    tpm = {}
    for g in genes + list(POSITIVE_CONTROLS):
        tpm[g] = round(float(rng.uniform(0.0, 0.6)), 2) if g in off else round(float(2 ** np.clip(rng.normal(4.5, 1.5), 1.5, 10)), 1)
    data.expression = pd.DataFrame({"gene": sorted(tpm), "tpm": [tpm[g] for g in sorted(tpm)]})
    d["not_expressed"] = off
    d["multi"] = {}
    scatter = rng.choice(sorted(set(tab["Gene"])), n_scatter, replace=False)
    for g in sorted(scatter):
        ids = [x for x in d["guide_ids"] if tab.set_index("sgRNA").loc[x, "Gene"] == g]
        d["multi"][str(rng.choice(ids))] = 2
    d["gamma_multi"] = float(gamma_multi)
    d["cells_per_guide"], d["clone_sigma"] = float(cells_per_guide), float(clone_sigma)
    d["outlier"], d["artefact"] = {}, {}
    data.copy_number = None
    return data


def _gene_guides(d: dict, g: str) -> list[str]:
    tab = d["sub"]["table"]
    genes = dict(zip(tab["sgRNA"], tab["Gene"]))
    return [x for x in d["guide_ids"] if genes[x] == g]


@recipe(TRACK, "single_guide_outliers")
def single_guide_outliers(data: Screen, rng, n_genes: int, effect: tuple = (-5.0, -3.0)) -> Screen:
    """n_genes neutral genes get ONE outlier sgRNA (of their 4) depleted by a drawn `effect` log2 (an off-target cut in
    an essential gene, or a guide that also disrupts an overlapping essential transcript); the gene's other sgRNAs
    are neutral."""
    d = data.model
    pick = sorted(rng.choice(_guide_free(d), n_genes, replace=False))
    for g in pick:
        d["outlier"][str(rng.choice(_gene_guides(d, g)))] = float(rng.uniform(*effect))
    d.setdefault("guide_taken", []).extend(pick)
    return data


@recipe(TRACK, "multi_locus")
def multi_locus(data: Screen, rng, n_genes: int, matches: tuple = (3, 8), guides: tuple = (3, 4)) -> Screen:
    """n_genes neutral genes belong to a paralog family / segmental duplication: `guides` (drawn) of their 4 sgRNAs
    match 3-8 (drawn) sites perfectly, so Cas9 cuts every copy and the cell dies of DNA damage regardless of gene
    function (per extra site -gamma_multi log2)."""
    d = data.model
    free = [g for g in _guide_free(d) if not any(x in d["multi"] for x in _gene_guides(d, g))]
    pick = sorted(rng.choice(free, n_genes, replace=False))
    for g in pick:
        ids = _gene_guides(d, g)
        k = int(rng.integers(guides[0], guides[1] + 1))
        for x in sorted(rng.choice(ids, min(k, len(ids)), replace=False)):
            d["multi"][str(x)] = int(rng.integers(matches[0], matches[1] + 1))
    d.setdefault("guide_taken", []).extend(pick)
    return data


@recipe(TRACK, "non_expressed_depletion")
def non_expressed_depletion(data: Screen, rng, n_genes: int, effect: tuple = (-1.8, -1.0)) -> Screen:
    """n_genes of the genes NOT expressed in the line (TPM < 1) deplete with every sgRNA by a drawn gene-independent
    `effect` (cutting toxicity in a locus shared with an expressed essential neighbour, or off-target activity): a
    knockout of a silent gene cannot remove a function the cell uses."""
    d = data.model
    free = [g for g in d["not_expressed"] if g not in _guide_taken(d)]
    pick = sorted(rng.choice(free, n_genes, replace=False))
    for g in pick:
        d["artefact"][g] = float(rng.uniform(*effect))
    d.setdefault("guide_taken", []).extend(pick)
    return data


@recipe(TRACK, "simulate_guides")
def simulate_guides(data: Screen, rng, replicates: int, noise: float, reads_per_guide: list) -> Screen:
    """A plasmid -> T0 -> final screen of one line: plasmid abundance a0 (the real initial counts of the chosen
    sgRNAs); transduction: Poisson(cells_per_guide x share x n) cells per sgRNA, log-normal clone sizes, so T0 and
    every final flask carry the factor (clone total / expectation); final replicate r: T0 abundance x 2^(effect +
    noise x e_r), e_r bootstrapped from the real residuals; effect = gene effect (+ outlier sgRNA, - gamma_multi x
    (sites - 1), + gene-independent artefact); sequencing Multinomial(n x reads per guide)."""
    d = data.model
    sub = d["sub"]
    line = d["lines"][0]
    cal = sub["cal"][line]
    tab = sub["table"].set_index("sgRNA")
    ids = d["guide_ids"]
    ctrl = _controls(rng, d["n_nt"])
    guides = pd.concat([pd.DataFrame({"sgRNA": ids, "gene": tab.loc[ids, "Gene"].to_numpy(), "category": "targeting"}),
                        ctrl], ignore_index=True)
    guides["perfect_matches"] = [d["multi"].get(x, 1) for x in guides["sgRNA"]]
    guides.loc[guides["category"] == "non_targeting", "perfect_matches"] = 0
    n = len(guides)
    cat = guides["category"].to_numpy()
    gene = guides["gene"].to_numpy()
    real_init = dict(zip(sub["table"]["sgRNA"], cal["initial"]))
    a0 = np.concatenate([[max(real_init[x], 0.5) for x in ids], _boot(rng, cal["initial"], len(ctrl))])
    a0 = np.maximum(a0, 0.5)
    base = np.array([_base_effect(d, line, g) if c == "targeting" else 0.0 for g, c in zip(gene, cat)])
    for g, e in d["extra"][line].items():
        base[gene == g] = e
    pc = cat == "positive_control"
    base[pc] = _boot(rng, cal["strong"], int(pc.sum())) / abs(np.median(cal["strong"])) * d["range"]
    tg = cat == "targeting"
    d["true_effect"] = {line: {str(g): round(float(e), 4) for g, e in zip(gene[tg], base[tg])}}
    eff = base.copy()
    for i, x in enumerate(guides["sgRNA"]):
        eff[i] += d["outlier"].get(x, 0.0) - d["gamma_multi"] * max(d["multi"].get(x, 1) - 1, 0)
    for g, e in d["artefact"].items():
        eff[gene == g] += e
    # transduction: the population every T0 and final sample descends from
    lam = d["cells_per_guide"] * a0 / a0.mean()
    cells = rng.poisson(lam)
    sig = d["clone_sigma"]
    sizes = np.exp(sig * rng.standard_normal(int(cells.sum())))
    clone = np.bincount(np.repeat(np.arange(n), cells), weights=sizes, minlength=n)
    a_t0 = a0 * clone / (lam * np.exp(sig ** 2 / 2))
    rpg = list(reads_per_guide)
    samples = [{"name": "plasmid", "cell_line": "none", "condition": "plasmid", "replicate": 1},
               {"name": f"{line}.T0", "cell_line": line, "condition": "initial", "replicate": 1}]
    cols = [rng.multinomial(int(rpg[0] * n), a0 / a0.sum()), rng.multinomial(int(rpg[1] * n), a_t0 / a_t0.sum())]
    for r in range(replicates):
        a = a_t0 * 2.0 ** (eff + noise * _boot(rng, cal["resid"], n))
        cols.append(rng.multinomial(int(rpg[(2 + r) % len(rpg)] * n), a / a.sum()))
        samples.append({"name": f"{line}.final.R{r + 1}", "cell_line": line, "condition": "final", "replicate": r + 1})
    order = np.argsort(guides["sgRNA"].to_numpy(), kind="stable")
    data.guides = guides.iloc[order].reset_index(drop=True)
    data.counts = np.column_stack(cols).astype(np.float64)[order]
    data.samples = samples
    d["sample_notes"] = GUIDE_NOTES
    return data


# ---------------------------------------------------------------- L3 dossier

@recipe(TRACK, "inject_l3_expression")
def inject_l3_expression(sub: dict, rng, line: str, genes: list[str], retention: float) -> dict:
    """L3 injected counterfactual (seed 001 E.3: modify an upstream quantity, re-run the real scorer): the real final
    read counts of every sgRNA of `genes` in `line` are binomially thinned to `retention` (0 < retention <= 1) with the
    world's seeded RNG; nothing is invented, counts only go down. The `dossier` step that follows recomputes every
    table from the edited counts with the reference analysis."""
    if not 0 < retention <= 1:
        raise ValueError(f"retention must be in (0, 1], got {retention}")
    tab = sub["table"].copy()
    m = tab["Gene"].isin(genes).to_numpy()
    j = f"{line}.final"
    tab.loc[m, j] = _thin(rng, tab.loc[m, j].to_numpy(), retention).astype(np.int64)
    return {**sub, "table": tab}


@recipe(TRACK, "dossier")
def dossier(sub: dict, rng, kind: str) -> Screen:
    """Gene-level evidence tables computed from the (real) table by the reference analysis: median-ratio size factors
    over the four samples, sgRNA LFC = log2((final + 1) / (initial + 1)) per line, gene = median sgRNA LFC, sgRNAs with
    LFC < -1, one-sided Mann-Whitney of the gene's sgRNAs against all other sgRNAs of that line, BH over the genes."""
    from scipy.stats import mannwhitneyu

    tab = sub["table"]
    cols = sub["cols"]
    c = tab[cols].to_numpy(np.float64)
    sf = _median_ratio(c)
    norm = c / sf
    gn = tab["Gene"].to_numpy()
    rows, guide_rows = [], []
    for line in LINES:
        i, f = cols.index(f"{line}.initial"), cols.index(f"{line}.final")
        L = np.log2((norm[:, f] + 1) / (norm[:, i] + 1))
        p = {}
        for g in sorted(set(gn)):
            x, y = L[gn == g], L[gn != g]
            p[g] = float(mannwhitneyu(x, y, alternative="less").pvalue)
        genes_sorted = sorted(p)
        q = false_discovery_control(np.array([p[g] for g in genes_sorted]))
        for g, qq in zip(genes_sorted, q):
            x = L[gn == g]
            rows.append({"cell_line": line, "gene": g, "n_guides": int(len(x)), "median_lfc": round(float(np.median(x)), 4),
                         "guides_depleted": int((x < -1).sum()), "p_depleted": float(f"{p[g]:.4g}"), "fdr": float(f"{qq:.4g}")})
    genes_tab = pd.DataFrame(rows)
    lib = pd.DataFrame({"sample": cols, "total_reads": c.sum(0).astype(int), "size_factor": np.round(sf, 4)})
    md = DOSSIER_TEXT[kind]
    data = Screen(guides=pd.DataFrame(), samples=[], counts=np.zeros((0, 0)))
    data.dossier = {"dossier.md": md, "gene_summary.csv": genes_tab, "samples.csv": lib}
    return data


_DOSSIER_COMMON = [
    "## Data",
    "A pooled CRISPR-knockout screen (lentiviral sgRNA library, negative selection: cells grown for several weeks",
    "after transduction) in two human myeloid leukaemia lines, HL60 (acute myeloid leukaemia, FAB M2) and KBM7",
    "(near-haploid chronic myeloid leukaemia line carrying the BCR-ABL1 fusion). This dossier covers a 100-gene slice",
    "of the library (genes A1CF to AHRR, ~10 sgRNAs per gene); sgRNA read counts were taken at the start (initial)",
    "and the end (final) of the screen in each line.",
    "",
    "## Reference analysis",
    "Counts were normalised with median-ratio size factors (samples.csv). For each sgRNA and line, log2 fold change",
    "LFC = log2((final + 1) / (initial + 1)) on normalised counts. For each gene: the median LFC of its sgRNAs, the number",
    "of its sgRNAs with LFC < -1, and a one-sided Mann-Whitney test of its sgRNAs' LFCs against all other sgRNAs in",
    "that line (depletion), with Benjamini-Hochberg FDR over the 100 genes.",
    "",
    "## Tables",
    "- gene_summary.csv: cell_line, gene, n_guides, median_lfc, guides_depleted, p_depleted, fdr",
    "- samples.csv: sample, total_reads, size_factor",
]
DOSSIER_TEXT = {
    "abl1_kbm7": "\n".join(["# Evidence dossier: line-specific gene dependencies in two leukaemia lines", "",
                            *_DOSSIER_COMMON, "",
                            "## Question",
                            "Which gene(s) in this slice is a dependency of one line but not the other, and why?"]),
    "shared_strength": "\n".join(["# Evidence dossier: gene dependencies of two leukaemia lines", "",
                                   *_DOSSIER_COMMON, "",
                                   "## Question",
                                   "How many dependencies does each line show in this slice at FDR 5%, and do the two "
                                   "lines depend on the same genes to the same degree? Explain what you find."]),
    "abl1_hl60": "\n".join(["# Evidence dossier: line-specific gene dependencies in two leukaemia lines", "",
                                      *_DOSSIER_COMMON, "",
                                      "## Question",
                                      "Which gene(s) in this slice is a dependency of one line but not the other, and why?"]),
}


# ---------------------------------------------------------------- writer

META_BASE = {
    "assay": "pooled CRISPR-Cas9 knockout screen (lentiviral sgRNA library, negative selection by proliferation); "
             "sgRNA read counts from amplicon sequencing of the integrated sgRNA cassettes",
    "library": "a 100-gene slice of a genome-scale library (about 10 sgRNAs per gene; the sgRNA ID names the gene, "
               "the strand and the cut-site coordinate), plus non-targeting control sgRNAs (gene NonTargeting) and "
               "sgRNAs against reference core-essential genes (positive controls)",
}


def _table_rows(data: Screen) -> pd.DataFrame:
    names = [s["name"] for s in data.samples]
    gene_col = data.table_gene if data.table_gene is not None else list(data.guides["gene"])
    df = pd.DataFrame({"sgRNA": data.guides["sgRNA"].to_numpy(), "Gene": gene_col})
    for j, nm in enumerate(names):
        df[nm] = data.counts[:, j] if not data.integer else np.rint(data.counts[:, j]).astype(np.int64)
    if data.dup_rows:
        df = pd.concat([df, df.iloc[data.dup_rows]], ignore_index=True)
        df = df.iloc[np.argsort(df["sgRNA"].to_numpy(), kind="stable")].reset_index(drop=True)
    return df


TRUE_HIT_EFFECT = 0.5   # a simulated gene is a true hit when its generative effect passes the prompt's |LFC| >= 0.5


def generative_truth(data: Screen) -> dict:
    """The simulated answer of an L2 screen (gold side only: the golden's `truth`): the genes whose generative effect
    passes the prompt's hit rule, from the simulation's own gene effects (cutting toxicity, drift and sampling noise
    excluded). essential: effect in task.cell_line <= -0.5; selective: (query - comparison) effect, in the comparison
    line's units, <= -0.5; resistance: the drug-only enriched genes (their effects are drawn in 1.5-3.0)."""
    d, task = data.model, data.task
    eff = d.get("true_effect") or {}
    kind = task.get("kind")
    if kind in ("essential", "guide_level"):
        e = eff[task["cell_line"]]
        hits = [g for g, x in e.items() if x <= -TRUE_HIT_EFFECT]
        effect = e
    elif kind == "selective":
        q, o = task["query_line"], task["comparison_line"]
        sq, so = d["scale"][q], d["scale"][o]
        effect = {g: round((eff[q][g] / sq - eff[o][g] / so) * so, 4) for g in eff[q]}
        hits = [g for g, x in effect.items() if x <= -TRUE_HIT_EFFECT]
    elif kind == "resistance":
        lib = set(eff[task["cell_line"]])
        effect = {g: round(float(x), 4) for g, x in d.get("resistance", {}).items() if g in lib}
        hits = list(effect)
    else:
        return {}
    return {"hits": sorted(hits), "n_hits": len(hits), "gene_effect": dict(sorted(effect.items()))}


@writer(TRACK)
def write(data: Screen, w: CanonicalWriter) -> None:
    if data.dossier is not None:
        w.files(data.dossier)
        return
    if data.model.get("true_effect") and data.task:
        w.truth(**generative_truth(data))
    df = _table_rows(data)
    text = df.to_csv(sep="\t", index=False, lineterminator="\n", float_format="%.4f")
    if data.truncate_at is not None:
        lines = text.split("\n")
        cut = lines[1 + data.truncate_at]
        text = "\n".join(lines[:1 + data.truncate_at]) + "\n" + cut[: max(len(cut) // 2, 1)]
    w.bytes("counts.txt", text.encode("utf-8"))
    keep = ["sgRNA", "gene", "category"] + (["perfect_matches"] if "perfect_matches" in data.guides.columns else [])
    lib = data.guides[keep].rename(columns={"gene": "Gene"})
    w.table("library.csv", lib)
    files = {
        "counts.txt": "sgRNA read-count table (MAGeCK count format: sgRNA, Gene, one column per sample; tab-separated)",
        "library.csv": "the sgRNA library design: sgRNA, Gene, category (targeting / non_targeting / positive_control)",
        "meta.json": "this description",
    }
    if "perfect_matches" in keep:
        files["library.csv"] += (", perfect_matches (number of perfect-match target sites of the sgRNA in the "
                                 "reference genome, from the library annotation)")
    if data.expression is not None:
        w.table("expression.csv", data.expression)
        files["expression.csv"] = ("RNA-seq expression of each library gene in the screened cell line (gene, tpm: "
                                   "transcripts per million)")
    if data.copy_number is not None:
        w.table("copy_number.csv", data.copy_number)
        files["copy_number.csv"] = ("absolute copy number per gene in each screened cell line (from the lines' "
                                    "SNP-array profiles): cell_line, gene, copy_number")
    meta = {
        **META_BASE,
        **({"library": "a 100-gene slice of a genome-scale library with 4 sgRNAs per gene (the sgRNA ID names the gene, "
                       "the strand and the cut-site coordinate), plus non-targeting control sgRNAs (gene NonTargeting) "
                       "and sgRNAs against reference core-essential genes (positive controls)"}
           if data.model.get("guide_ids") else {}),
        "files": files,
        "values": "raw read counts per sgRNA (non-negative integers), not normalised",
        "samples": {s["name"]: {"cell_line": s["cell_line"], "condition": s["condition"], "replicate": s["replicate"]}
                    for s in data.samples},
        "n_sgrnas_in_library": int(len(data.guides)),
    }
    if data.task:
        meta["task"] = {k: v for k, v in data.task.items() if k != "kind"}
    if data.model.get("sample_notes"):
        meta["sample_conditions"] = data.model["sample_notes"]
    w.json("meta.json", meta)
