"""bulkrna track: simulated bulk RNA-seq gene-count experiments (negative binomial with a DESeq2-style dispersion
trend) and the recipes that turn them into worlds.

Substrate (seeded simulation, real=false)
-----------------------------------------
`bulk_gene_universe` draws a fixed universe of genes once (seed 0): 3,000 protein-coding-like genes with synthetic
Ensembl-style identifiers (ENSG + 11 digits, never real IDs) and symbols (BRG00001 ...), a chromosome (1-22) and an
exonic length (log-normal, median 2.5 kb, sdlog 0.7 in natural log units, clipped to 0.3-15 kb: chosen to resemble the
spread of human union-exon gene lengths); a baseline mean count at a library of 20 M assigned reads that is log-normal
(meanlog ln 60, sdlog 1.7: median ~60, 10% of genes below ~7 and 5% above ~1,000 counts, chosen to resemble
a human cell-line gene-count distribution after dropping unexpressed genes, not fitted); and a gene-wise NB dispersion
alpha_g = (a0 + a1 / mu_g) * exp(0.45 z_g), z ~ N(0, 1): the parametric mean-dispersion trend of DESeq2 (Love, Huber,
Anders 2014 Genome Biol 15:550, Methods) with log-normal scatter around it.
The trend coefficients are drawn per world by `simulate`: asymptotic dispersion a0 in 0.01-0.05, a biological
coefficient of variation of 10-22% (the edgeR User's Guide gives typical BCVs of ~0.1 for genetically identical
model organisms and ~0.4 for unrelated human individuals, so these worlds stand for well-controlled cell-line or
inbred experiments); the extra-Poisson term a1 in 0.5-2.0 and the scatter sd of log dispersion 0.45 are judgement
values, chosen so that the trend rises at low counts as DESeq2 dispersion plots do, not values fitted to a data set.
Sex-linked genes: XIST (chrX, expressed in female samples, mean ~400 at 20 M reads; ~0.1 in male samples) and seven
chrY genes (RPS4Y1, DDX3Y, KDM5D, UTY, EIF1AY, USP9Y, ZFY; means 60-500 in male samples, ~0.05 in female samples).
92 ERCC spike-in transcripts (IDs drawn in the ERCC-00nnn style; concentrations log2-uniform over 2^-4..2^14, about
the 10^6-fold span of ERCC Mix 1, ~0.01-15,000 attomol/ul) are used by the normalisation family only.

Counts: per sample j a depth D_j (library size in assigned reads, drawn log-normal around the world's depth), per
gene a log2 effect matrix M (condition, batch, donor, global shift, degradation), and reads distributed in proportion
to molecules: mu_gj = D_j * m_gj / sum_g m_gj with m_gj = base_g * 2^M_gj (plus spike-in molecules, a fixed amount
per sample, when the world has them). Counts ~ NB(mean mu_gj, dispersion alpha_g(mu_g)).

Recipes (registered as "bulkrna.<name>")
----------------------------------------
simulate(...)              the experiment: genes kept (n_genes drawn), samples and their sheet (condition, sex,
                           batch, donor), depths, dispersion trend, condition effect (n_de genes, |log2FC| 0.8-3),
                           optional batch (n genes, log2 effect), donor (paired; sd of donor log2 effects), global
                           transcriptional shift (fraction of genes, log2 size) and spike-ins, low-count genes; and
                           one degraded sample (3' bias: mean x (length / 2.5 kb)^-beta, library x retention)
                           contaminate {k, n, fraction}: k libraries of the test condition carry a foreign tissue's
                           signature of n genes the tissue barely expresses, at a read share of fraction x U(0.6, 1.4)
draw_counts()              NB counts from the means (deterministic in the world's RNG)
processing(outcome_filter) the matrix history in meta.json `processing` (condition_de): genes with no read removed
                           (label-blind); outcome_filter: only genes whose test / reference ratio of mean CPM has
                           |log2| >= outcome_filter kept (a filter on the outcome before testing)
sequence_lanes(lanes, rerun)
                           counts drawn library by library instead: lambda ~ Gamma(1/alpha, mu alpha) per specimen, each
                           run Poisson(lambda x run share); `lanes` runs per library (same index), `rerun` libraries
                           re-made from the same RNA under a new name and index (L1); a specimen column names the source
sort_genes()               L1: genes in gene-ID order (kept for the L1 draws; the writer sorts every world: gene rows
                           by gene ID and sample columns by sample name, the same rule in clean and defective worlds)
swap_sheet_rows(size)      L1: sample-sheet rows move between samples: size 2, two samples of different condition
                           and sex exchange rows; size 3, three samples of different (condition, sex) rotate rows
as_normalised()            L1: the matrix holds DESeq2-normalised values (count / size factor) posing as counts
duplicate_sample(n)        L1: n samples' columns each appear a second time under a new name (same library processed
                           twice), with their own sample-sheet rows and i7 index (as a merged sheet that lists the
                           library twice records it: nothing in the sheet gives the copy away, only the counts do)
version_ids()              L1: counts.tsv gene IDs carry Ensembl version suffixes (GENCODE style) that genes.tsv lacks
truncate_file(fraction)    L1: counts.tsv is cut at a byte offset (an interrupted transfer): the last line is partial
                           and every later gene is missing

L3 dossiers (real data; the L1/L2 substrate above stays the simulation)
----------------------------------------------------------------------
marioni_counts()           L3: the real Marioni et al. (2008, Genome Res 18:1509) RNA-seq counts of one human kidney
                           and one human liver sample, as Debian r-bioc-noiseq 2.42.0-1 ships them
                           (NOISeq/data/Marioni.RData, fetched to .cache/data/noiseq/ by `benchmark data fetch`; read
                           with rdata): 5,088 Ensembl genes of chromosomes 1-4 x 10 lanes (run 1: kidney 3, liver 4;
                           run 2: kidney 2, liver 1) with biotype, chromosome, length and GC. The lanes of a tissue
                           are technical replicates of one library: one biological sample per tissue.
inject_overdispersion(tissue, retention, cv)
                           L3 injected counterfactual: every count of the tissue's lanes binomially thinned with a
                           retention p ~ Beta(mean retention, CV cv) drawn per gene and lane (counts only go down; the
                           added variance is an extra-Poisson dispersion of ~cv^2 between that tissue's lanes)
dossier(kind)              L3: evidence tables computed from the (real or edited) lane counts: per tissue (all lanes,
                           and the lanes of each run) the Pearson X2 test of each gene against Poisson lane sampling,
                           variance / Poisson variance, moment NB dispersion and the log-log variance-mean slope,
                           summarised overall, by mean-count bin and for the 8 most overdispersed genes; and a
                           kidney-vs-liver exact Poisson test on the pooled lanes; kind composition_native adds
                           each tissue's read share of its 1 / 5 / 20 most-read genes and the per-million median log2
                           ratio kidney / liver
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import false_discovery_control
import pandas as pd

from benchmark.suite.canonical import CanonicalWriter
from benchmark.suite.registry import recipe, substrate, writer

TRACK = "bulkrna"
SEX_GENES_Y = ("RPS4Y1", "DDX3Y", "KDM5D", "UTY", "EIF1AY", "USP9Y", "ZFY")
N_ERCC = 92
REF_DEPTH = 20e6


@dataclass
class BulkData:
    genes: pd.DataFrame                 # gene_id, symbol, chrom, length, base (mean at REF_DEPTH), type
    samples: pd.DataFrame               # sample sheet: sample, condition, [sex, batch, donor]
    depth: np.ndarray | None = None     # reads per sample
    M: np.ndarray | None = None         # genes x samples log2 effects on molecules
    alpha: np.ndarray | None = None     # gene-wise dispersion
    sex: np.ndarray | None = None       # true sex per sample
    spike_molecules: float = 0.0        # spike-in molecules per sample relative to the endogenous total (0: none)
    counts: pd.DataFrame | None = None  # genes x samples (index gene_id)
    truth: dict = field(default_factory=dict)
    sheet_columns: list[str] = field(default_factory=lambda: ["sample", "condition", "sex"])
    integer: bool = True
    count_ids: list[str] | None = None  # IDs written in counts.tsv (None: genes.gene_id)
    cut_fraction: float | None = None   # counts.tsv cut at this fraction of its bytes
    task: dict = field(default_factory=dict)
    dossier: dict | None = None
    extra_meta: dict = field(default_factory=dict)


@substrate("bulk_gene_universe")
def universe(seed: int = 0, n_genes: int = 3000) -> BulkData:
    rng = np.random.default_rng(seed)
    ids = set()
    while len(ids) < n_genes + 8:
        ids.add("ENSG" + "".join(rng.choice(list("0123456789"), 11)))
    ids = sorted(ids)
    rng.shuffle(ids)
    sym = [f"BRG{i:05d}" for i in range(1, n_genes + 1)] + ["XIST", *SEX_GENES_Y]
    chrom = [f"chr{c}" for c in rng.integers(1, 23, n_genes)] + ["chrX"] + ["chrY"] * len(SEX_GENES_Y)
    length = np.clip(np.exp(rng.normal(np.log(2500), 0.7, n_genes + 8)), 300, 15000).round()
    base = np.exp(rng.normal(np.log(60), 1.7, n_genes))
    base = np.concatenate([base, [400.0], rng.uniform(60, 500, len(SEX_GENES_Y))])
    genes = pd.DataFrame({"gene_id": ids[: n_genes + 8], "symbol": sym, "chrom": chrom, "length": length.astype(int),
                          "base": base, "type": "gene", "z": rng.normal(0, 1, n_genes + 8)})
    return BulkData(genes=genes, samples=pd.DataFrame())


MIN_INDEX_DISTANCE = 3  # positions at which any two of a sheet's i7 indices differ, as index kits are designed


def too_close(idx: str, used) -> bool:
    """Whether an index sits within MIN_INDEX_DISTANCE - 1 mismatches of one already on the sheet (one read error
    could then assign a read to the wrong library)."""
    return any(sum(x != y for x, y in zip(idx, u)) < MIN_INDEX_DISTANCE for u in used)


def fresh_index(rng, used) -> str:
    """An i7 index for a library added to a sheet (a re-made or merged-in library): drawn until it stands
    MIN_INDEX_DISTANCE apart from every index in `used`."""
    while too_close(idx := "".join(rng.choice(list("ACGT"), 8)), used):
        pass
    return idx


def distinct_indices(drawn: list[str]) -> list[str]:
    """A sample sheet's indices, any two differing at MIN_INDEX_DISTANCE positions or more: a chance collision of
    the random draw (blind study 25: two libraries of degraded_sample shared GACATCCG, which an analyst rightly
    reported as a sheet error no defect of the world explains) is redrawn from a generator seeded by the drawn set,
    so the world's own stream is untouched and a sheet whose draw already qualifies keeps its bytes."""
    side = np.random.default_rng(int.from_bytes(hashlib.sha256("".join(drawn).encode()).digest()[:8], "little"))
    out: list[str] = []
    for idx in drawn:
        while too_close(idx, out):
            idx = "".join(side.choice(list("ACGT"), 8))
        out.append(idx)
    return out


def _sexed(genes: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    x = (genes["symbol"] == "XIST").to_numpy()
    y = genes["symbol"].isin(SEX_GENES_Y).to_numpy()
    return x, y


@recipe(TRACK, "simulate")
def simulate(data: BulkData, rng, n_genes: int, n_per_condition: int, depth: float, a0: float, a1: float,
             n_de: int, conditions: list[str] = ("control", "treated"), depth_sd: float = 0.2,
             batch: dict | None = None, donor_sd: float | None = None, shift: dict | None = None,
             spike_share: float | None = None, degrade: dict | None = None, min_base: float | None = None,
             lowcount: dict | None = None, de_lfc: tuple = (0.8, 3.0), sexes: str = "balanced",
             sheet: list[str] | None = None, low_sample: float | None = None,
             contaminate: dict | None = None) -> BulkData:
    g = data.genes
    core = np.flatnonzero(g["symbol"].str.startswith("BRG").to_numpy())
    if min_base is not None:
        core = core[g["base"].to_numpy()[core] >= min_base]
    keep = np.sort(rng.choice(core, min(n_genes, len(core)), replace=False))
    sexg = np.flatnonzero(~g["symbol"].str.startswith("BRG").to_numpy())
    genes = g.iloc[np.concatenate([keep, sexg])].reset_index(drop=True)
    if lowcount:  # extra low-count genes (an unfiltered matrix): base 0.5-6 counts at 20 M reads
        lo = np.flatnonzero(g["symbol"].str.startswith("BRG").to_numpy())
        lo = np.setdiff1d(lo, keep)
        pick = np.sort(rng.choice(lo, int(lowcount["n"]), replace=False))
        extra = g.iloc[pick].copy()
        extra["base"] = np.exp(rng.uniform(np.log(0.5), np.log(6.0), len(pick)))
        genes = pd.concat([genes, extra]).reset_index(drop=True)
    G = len(genes)
    ns = 2 * n_per_condition
    cond = np.array([conditions[0]] * n_per_condition + [conditions[1]] * n_per_condition)
    if sexes == "balanced":
        half = [("F" if i % 2 == 0 else "M") for i in range(n_per_condition)]
        sex = np.array(list(rng.permutation(half)) + list(rng.permutation(half)))
    else:
        sex = np.array([sexes] * ns)
    M = np.zeros((G, ns))
    is_core = genes["symbol"].str.startswith("BRG").to_numpy()
    cand = np.flatnonzero(is_core & (genes["base"].to_numpy() >= 8))
    de = np.sort(rng.choice(cand, n_de, replace=False))
    lfc = rng.uniform(de_lfc[0], de_lfc[1], n_de) * rng.choice([-1, 1], n_de)
    M[np.ix_(de, np.flatnonzero(cond == conditions[1]))] += lfc[:, None]
    if lowcount and lowcount.get("n_de"):  # low-count genes respond too (their MLE fold changes are noisy)
        lo_idx = np.flatnonzero(is_core & (genes["base"].to_numpy() < 8))
        lde = np.sort(rng.choice(lo_idx, int(lowcount["n_de"]), replace=False))
        llfc = rng.uniform(de_lfc[0], de_lfc[1], len(lde)) * rng.choice([-1, 1], len(lde))
        M[np.ix_(lde, np.flatnonzero(cond == conditions[1]))] += llfc[:, None]
        de, lfc = np.concatenate([de, lde]), np.concatenate([lfc, llfc])
    truth = {"de_genes": genes["gene_id"].to_numpy()[de].tolist(), "de_lfc": lfc.round(4).tolist()}
    cols = {"sample": None, "condition": cond, "sex": sex}
    if batch:  # {"layout": "AABB..." per sample (control first), "n": genes, "lfc": size}
        lay = np.array(list(batch["layout"]))
        bg = np.sort(rng.choice(np.flatnonzero(is_core), int(batch["n"]), replace=False))
        bl = float(batch["lfc"]) * rng.choice([-1, 1], len(bg)) * rng.uniform(0.6, 1.4, len(bg))
        M[np.ix_(bg, np.flatnonzero(lay == "B"))] += bl[:, None]
        cols["batch"] = np.array([f"batch{c}" for c in lay])
        truth["batch_genes"] = genes["gene_id"].to_numpy()[bg].tolist()
    if donor_sd:  # paired: donor d gives one control and one treated sample
        donors = np.array([f"D{i + 1}" for i in range(n_per_condition)] * 2)
        eff = rng.normal(0, donor_sd, (G, n_per_condition))
        M += eff[:, [int(d[1:]) - 1 for d in donors]]
        cols["donor"] = donors
        sex = np.concatenate([sex[:n_per_condition], sex[:n_per_condition]])
        cols["sex"] = sex
    if shift:  # global transcriptional shift in the test condition: a fraction of genes scaled by 2^size
        sel = rng.random(G) < float(shift["fraction"])
        sel &= is_core
        M[np.ix_(np.flatnonzero(sel), np.flatnonzero(cond == conditions[1]))] += float(shift["size"])
        truth["shift"] = {"fraction": float(shift["fraction"]), "size": float(shift["size"])}
    base = genes["base"].to_numpy().copy()
    xg, yg = _sexed(genes)
    B = np.repeat(base[:, None], ns, axis=1)
    B[np.ix_(xg, np.flatnonzero(sex == "M"))] = 0.1
    B[np.ix_(yg, np.flatnonzero(sex == "F"))] = 0.05
    mol = B * 2.0 ** M
    dep = depth * np.exp(rng.normal(0, depth_sd, ns))
    if degrade:  # one sample of the drawn condition: 3' bias and a smaller library
        j = int(rng.choice(np.flatnonzero(cond == degrade.get("condition", conditions[1]))))
        L = genes["length"].to_numpy()
        mol[:, j] *= (L / 2500.0) ** (-float(degrade["beta"]))
        dep[j] *= float(degrade["retention"])
        truth["degraded_index"] = j
    if low_sample:  # boundary: one sample with a smaller (still adequate) library, nothing else wrong
        j = int(rng.integers(ns))
        dep[j] *= float(low_sample)
        truth["low_index"] = j
    if contaminate:  # a contaminating tissue's transcripts in k libraries of the test condition (see contamination())
        truth["contamination"] = contamination(mol, genes, cond == conditions[1], M, rng, **contaminate)
    alpha_mu = base * depth / REF_DEPTH
    alpha = (a0 + a1 / np.maximum(alpha_mu, 0.05)) * np.exp(0.45 * genes["z"].to_numpy())
    alpha = np.minimum(alpha, 10.0)
    data.genes = genes.drop(columns=["z"])
    data.truth = {**data.truth, **truth, "a0": a0, "a1": a1}
    data.M, data.alpha, data.sex = M, alpha, sex
    # reads in proportion to molecules; every sample's endogenous molecules are normalised by the control mean total
    tot_ref = mol[:, cond == conditions[0]].sum(0).mean()
    mu_mol = mol / tot_ref
    if spike_share:
        erc = pd.DataFrame({"gene_id": [f"ERCC-{i:05d}" for i in sorted(rng.choice(np.arange(2, 180), N_ERCC, replace=False))],
                            "symbol": "", "chrom": "ERCC", "length": rng.integers(250, 2000, N_ERCC), "type": "spike_in"})
        erc["symbol"] = erc["gene_id"]
        conc = 2.0 ** rng.uniform(-4, 14, N_ERCC)
        spike = conc / conc.sum() * spike_share  # spike molecules relative to a control sample's endogenous total
        erc["base"] = spike * REF_DEPTH
        sa = (a0 + a1 / np.maximum(erc["base"].to_numpy() * depth / REF_DEPTH, 0.05)) * 0.6
        data.genes = pd.concat([data.genes, erc]).reset_index(drop=True)
        mu_mol = np.vstack([mu_mol, np.repeat(spike[:, None], ns, axis=1)])
        data.alpha = np.concatenate([alpha, sa])
    # the genes kept stand for the whole transcriptome's composition: a sample's reads over them are its depth times
    # their share of the reads at the reference composition
    share = float(genes["base"].to_numpy().sum() / REF_DEPTH) * (1.0 + (spike_share or 0.0))
    mu = mu_mol / mu_mol.sum(0, keepdims=True) * (dep * share)[None, :]
    data.truth["mu"] = mu
    data.depth = dep
    # sample names: S01..Snn assigned at random (no position or name encodes the condition)
    names = [f"S{i + 1:02d}" for i in rng.permutation(ns)]
    cols["sample"] = np.array(names)
    if "contamination" in data.truth:  # sample indices -> names
        c = data.truth.pop("contamination")
        data.truth["contaminated"] = sorted(names[j] for j in c["index"])
        data.truth["contaminant_share"] = {names[j]: f for j, f in c["shares"].items()}
        data.truth["contaminant_genes"] = sorted(c["genes"])
    # the i7 index (8 nt) each library was sequenced under, as sample sheets record it
    cols["index"] = np.array(distinct_indices(["".join(rng.choice(list("ACGT"), 8)) for _ in range(ns)]))
    data.samples = pd.DataFrame({k: v for k, v in cols.items()})
    data.sheet_columns = [c for c in (sheet or ["sample", "condition", "sex", "batch", "donor"]) if c in cols or c == "specimen"] + ["index"]
    data.task = {"test_condition": conditions[1], "reference_condition": conditions[0]}
    return data


def contamination(mol: np.ndarray, genes: pd.DataFrame, test: np.ndarray, M: np.ndarray, rng, k: int, n: int,
                  fraction: float) -> dict:
    """A contaminating tissue (e.g. blood in a solid-tissue dissection) in k libraries of the test condition: a
    signature of n genes the tissue itself barely expresses (baseline < 8 reads at 20 M, never condition-responsive),
    each with a log-normal weight (sdlog 1), makes up a share f_j = fraction x U(0.6, 1.4) of library j's molecules
    (the sample's own transcripts keep 1 - f_j). Edits mol in place; returns the contaminated sample indices, their
    shares and the signature's gene IDs."""
    is_core = genes["symbol"].str.startswith("BRG").to_numpy()
    responsive = (M != 0).any(1)
    cand = np.flatnonzero(is_core & (genes["base"].to_numpy() < 8) & ~responsive)
    sig = np.sort(rng.choice(cand, int(n), replace=False))
    w = np.exp(rng.normal(0, 1.0, len(sig)))
    w /= w.sum()
    idx = sorted(int(j) for j in rng.choice(np.flatnonzero(test), int(k), replace=False))
    shares = {}
    for j in idx:
        f = float(fraction) * float(rng.uniform(0.6, 1.4))
        tot = mol[:, j].sum()
        mol[sig, j] += w * tot * f / (1 - f)
        shares[j] = round(f, 4)
    return {"index": idx, "shares": shares, "genes": genes["gene_id"].to_numpy()[sig].tolist()}


@recipe(TRACK, "draw_counts")
def draw_counts(data: BulkData, rng) -> BulkData:
    mu = data.truth.pop("mu")
    data.truth["mean_count"] = dict(zip(data.genes["gene_id"], mu.mean(1)))  # expected reads per sample, by gene
    a = data.alpha[:, None]
    n = 1.0 / a
    p = n / (n + mu)
    X = rng.negative_binomial(np.broadcast_to(n, mu.shape), p)
    data.counts = pd.DataFrame(X, index=data.genes["gene_id"].to_numpy(), columns=data.samples["sample"].to_numpy())
    return data


PROCESSING_COUNTED = "reads assigned to genes with featureCounts (union exons of the annotation); one column per library"


@recipe(TRACK, "processing")
def processing(data: BulkData, rng, outcome_filter: float | None = None) -> BulkData:
    """The matrix's history, stated in meta.json `processing` (a list of steps, in order) in every world of the family.
    Every world: genes with no read in any library removed (a label-blind filter). outcome_filter: a collaborator then
    kept only the genes whose ratio of mean counts per million (test over reference condition, computed on these
    libraries over every gene) had |log2| >= outcome_filter: a filter on the between-condition fold change, i.e.
    selection on the outcome before testing (Bourgon, Gentleman, Huber 2010 PNAS 107:9546: a filter must be
    independent of the test statistic under the null; a fold-change filter is not)."""
    X = data.counts
    steps = [PROCESSING_COUNTED]
    nz = X.sum(1) > 0
    data.counts, data.genes = X[nz], data.genes[nz.to_numpy()].reset_index(drop=True)
    steps.append("genes with no read in any library removed (a filter blind to the sample labels); no sample removed")
    if outcome_filter is not None:
        X = data.counts
        cpm = X / X.sum(0) * 1e6
        cond = data.samples.set_index("sample")["condition"].reindex(X.columns).to_numpy()
        t, r = data.task["test_condition"], data.task["reference_condition"]
        ratio = np.log2((cpm.loc[:, cond == t].mean(1) + 0.01) / (cpm.loc[:, cond == r].mean(1) + 0.01))
        keep = (ratio.abs() >= float(outcome_filter)).to_numpy()
        n0 = int(len(X))
        data.counts, data.genes = X[keep], data.genes[keep].reset_index(drop=True)
        steps.append(f"then a collaborator kept only the genes whose {t} / {r} ratio of mean counts per million (computed "
                     f"on these libraries) had |log2| >= {float(outcome_filter):g}: {int(keep.sum())} of {n0} genes kept")
        data.truth["outcome_filter"] = {"threshold": float(outcome_filter), "n_before": n0, "n_kept": int(keep.sum())}
    data.extra_meta = {**data.extra_meta, "processing": steps}
    return data


@recipe(TRACK, "sequence_lanes")
def sequence_lanes(data: BulkData, rng, lanes: int = 1, rerun: int = 0, lane_sd: float = 0.2) -> BulkData:
    """Counts drawn library by library (replaces draw_counts; the same negative binomial in law): each simulated
    sample is one biological specimen whose library has a true expression lambda_g ~ Gamma(1 / alpha_g, mu_g alpha_g)
    (the gamma mixing of the NB), and every sequencing run of that library is Poisson(lambda_g x run share), the run's
    share drawn log-normal (sd lane_sd) around 1 / lanes. `lanes` runs per library (lane re-runs of one library share
    its i7 index); `rerun` libraries (drawn) are re-made from the same RNA and sequenced once more under their own new
    index (technical replicates that a merged sample sheet lists as further samples). Runs of one library differ by
    Poisson sampling only, never by the biological dispersion alpha. Sample names are re-drawn over all runs; the
    specimen column (when the sheet asks for it) names the RNA specimen each run comes from."""
    mu = data.truth.pop("mu")
    G, ns = mu.shape
    a = data.alpha[:, None]
    lam = rng.gamma(np.broadcast_to(1.0 / a, mu.shape), mu * a)
    extra = sorted(int(j) for j in rng.choice(ns, int(rerun), replace=False)) if rerun else []
    runs = [(j, k) for j in range(ns) for k in range(int(lanes))] + [(j, int(lanes)) for j in extra]
    share = np.exp(rng.normal(0, lane_sd, len(runs))) / int(lanes)
    share[int(lanes) * ns:] = np.exp(rng.normal(0, lane_sd, len(extra)))
    X = rng.poisson(np.column_stack([lam[:, j] * share[r] for r, (j, _) in enumerate(runs)]))
    s = data.samples.reset_index(drop=True)
    rows = s.iloc[[j for j, _ in runs]].reset_index(drop=True)
    used = set(s["index"])
    for r, (j, k) in enumerate(runs):
        if k >= int(lanes):  # a re-made library: its own index
            idx = fresh_index(rng, used)
            used.add(idx)
            rows.loc[r, "index"] = idx
    spec = [f"P{i + 1:02d}" for i in rng.permutation(ns)]
    rows["specimen"] = [spec[j] for j, _ in runs]
    names = [f"S{i + 1:02d}" for i in rng.permutation(len(runs))]
    rows["sample"] = names
    data.samples = rows
    if "specimen" not in data.sheet_columns and int(lanes) > 1:
        raise ValueError("lanes > 1 needs the specimen column in the sheet")
    data.truth["mean_count"] = dict(zip(data.genes["gene_id"], (mu * share.sum() / ns).mean(1)))
    groups = [sorted(names[r] for r, (j, _) in enumerate(runs) if j == jj) for jj in range(ns)]
    data.truth["technical_groups"] = sorted(g for g in groups if len(g) > 1)
    data.counts = pd.DataFrame(X, index=data.genes["gene_id"].to_numpy(), columns=names)
    return data


# ---------------------------------------------------------------- L1 defects

@recipe(TRACK, "swap_sheet_rows")
def swap_sheet_rows(data: BulkData, rng, size: int = 2) -> BulkData:
    """Sample-sheet rows (all columns but the sample name) move between samples, as when a sheet is typed from tube
    labels in the wrong order. size 2: two samples of different condition and different sex exchange their rows;
    size 3: three samples of three different (condition, sex) combinations pass their rows round a cycle (sample k
    gets the row of sample k - 1), so each of them carries a wrong sex, a wrong condition or both."""
    s = data.samples
    cols = [c for c in s.columns if c != "sample"]
    if size == 2:
        c0, c1 = data.task["reference_condition"], data.task["test_condition"]
        pairs = [(i, j) for i in np.flatnonzero(s["condition"] == c0) for j in np.flatnonzero(s["condition"] == c1)
                 if s["sex"].iloc[i] != s["sex"].iloc[j]]
        cycle = list(pairs[int(rng.integers(len(pairs)))])
    elif size == 3:
        combo = (s["condition"] + "/" + s["sex"]).to_numpy()
        kinds = sorted(set(combo))
        pick = [str(k) for k in rng.choice(kinds, 3, replace=False)]
        cycle = [int(rng.choice(np.flatnonzero(combo == k))) for k in pick]
    else:
        raise ValueError(f"size must be 2 or 3, got {size}")
    rows = [s.loc[i, cols].to_numpy().copy() for i in cycle]
    for k, i in enumerate(cycle):
        s.loc[i, cols] = rows[k - 1]
    data.truth["swapped"] = sorted(s["sample"].iloc[i] for i in cycle)
    return data


@recipe(TRACK, "as_normalised")
def as_normalised(data: BulkData, rng) -> BulkData:
    """The matrix holds DESeq2 median-of-ratios normalised values (count / size factor), still called counts."""
    X = data.counts.to_numpy().astype(float)
    pos = (X > 0).all(1)
    lg = np.log(X[pos])
    sf = np.exp(np.median(lg - lg.mean(1, keepdims=True), axis=0))
    data.counts = pd.DataFrame(X / sf[None, :], index=data.counts.index, columns=data.counts.columns)
    data.integer = False
    return data


@recipe(TRACK, "duplicate_sample")
def duplicate_sample(data: BulkData, rng, n: int = 1) -> BulkData:
    """n libraries' columns each appear twice under two names (the same FASTQ quantified twice): a new sheet row with
    the source's annotations per copy; all names re-drawn so no copy is recognisable by its name."""
    s = data.samples
    src_idx = [int(j) for j in rng.choice(len(s), n, replace=False)]
    X = data.counts.copy()
    rows, pairs = [], []
    for k, j in enumerate(src_idx):
        src, tag = s["sample"].iloc[j], f"__dup{k}__"
        X[tag] = X[src].to_numpy()
        row = s.iloc[[j]].copy()
        row["sample"] = tag
        if "index" in row:  # the copy got its own sheet row when the sheets were merged: its own index sequence
            used = set(s["index"]) | {r["index"].iloc[0] for r in rows}
            row["index"] = fresh_index(rng, used)
        rows.append(row)
        pairs.append((src, tag))
    s = pd.concat([s, *rows]).reset_index(drop=True)
    names = [f"S{i + 1:02d}" for i in rng.permutation(len(s))]
    ren = dict(zip(s["sample"], names))
    s["sample"] = names
    X.columns = [ren[c] for c in X.columns]
    data.samples, data.counts = s, X
    data.truth["duplicates"] = sorted(sorted([ren[a], ren[b]]) for a, b in pairs)
    return data


@recipe(TRACK, "version_ids")
def version_ids(data: BulkData, rng) -> BulkData:
    """counts.tsv names genes with Ensembl version suffixes (ENSG....N, GENCODE quantification); genes.tsv does not."""
    v = rng.integers(1, 20, len(data.counts))
    data.count_ids = [f"{g}.{k}" if g.startswith("ENSG") else g for g, k in zip(data.counts.index, v)]
    return data


@recipe(TRACK, "sort_genes")
def sort_genes(data: BulkData, rng) -> BulkData:
    """genes.tsv and counts.tsv rows in gene-ID order (as many pipelines write them): no gene's row position says
    what it is (the simulation appends the sex-linked genes last). The writer now writes every world's rows in gene-ID
    order and its sample columns by name, so this step only keeps the L1 worlds' draws unchanged."""
    order = np.argsort(data.genes["gene_id"].to_numpy(), kind="stable")
    data.genes = data.genes.iloc[order].reset_index(drop=True)
    if data.counts is not None:
        data.counts = data.counts.loc[data.genes["gene_id"].to_numpy()]
    if data.alpha is not None:
        data.alpha = data.alpha[order]
    if data.M is not None and len(data.M) == len(order):
        data.M = data.M[order]
    return data


@recipe(TRACK, "truncate_file")
def truncate_file(data: BulkData, rng, fraction: float) -> BulkData:
    data.cut_fraction = float(fraction)
    return data


@recipe(TRACK, "set_task")
def set_task(data: BulkData, rng, **task) -> BulkData:
    data.task.update(task)
    return data


# ---------------------------------------------------------------- L3 dossier (real Marioni et al. 2008 counts)

L3_MIN_MEAN = 5.0            # genes tested for lane-to-lane dispersion: mean of >= 5 reads per lane in the group
L3_BINS = ((5, 20), (20, 100), (100, 1000), (1000, None))


@recipe(TRACK, "marioni_counts")
def marioni_counts(data: BulkData, rng) -> BulkData:
    """L3: replace the simulated experiment by the real Marioni et al. (2008) kidney / liver counts (Debian
    r-bioc-noiseq, NOISeq/data/Marioni.RData; read with rdata): 5,088 Ensembl genes of chromosomes 1-4 x 10 lanes.
    The lanes are technical replicates: one kidney and one liver RNA sample (one library each), sequenced on 7 lanes
    of run 1 (kidney 3, liver 4) and 3 lanes of run 2 (kidney 2, liver 1)."""
    import rdata

    from benchmark.suite.package_data import package_file

    r = rdata.read_rda(str(package_file("noiseq", "Marioni.RData")))
    C = r["mycounts"].astype("int64")
    lanes = list(C.columns)
    samples = pd.DataFrame({"lane": [c[:4] for c in lanes], "tissue": [str(r["myfactors"].loc[c, "Tissue"]).lower() for c in lanes],
                            "run": [int(c[1]) for c in lanes]})
    C.columns = samples["lane"].tolist()
    ids = list(C.index)
    genes = pd.DataFrame({"gene_id": ids, "chrom": [f"chr{x}" for x in r["mychroms"].loc[ids, "Chr"].astype(str)],
                          "biotype": np.asarray(r["mybiotypes"]).astype(str),
                          "length": np.asarray(r["mylength"].values, dtype=float), "gc": np.asarray(r["mygc"].values, dtype=float)})
    data.genes, data.samples, data.counts = genes, samples, C
    data.truth = {"source": "Marioni.RData"}
    return data


@recipe(TRACK, "inject_overdispersion")
def inject_overdispersion(data: BulkData, rng, tissue: str, retention: float, cv: float) -> BulkData:
    """L3 injected counterfactual: every real count of every lane of `tissue` is binomially thinned with its own
    retention p ~ Beta (mean `retention`, coefficient of variation `cv`), drawn per gene and lane from the world's RNG.
    Counts only go down; binomial thinning of a Poisson count with a fixed p stays Poisson, so the only new
    variance is the lane-to-lane spread of p: an extra-Poisson (negative-binomial-like) dispersion of ~cv^2 between
    that tissue's lanes. The other tissue's lanes are untouched."""
    if not (0 < retention < 1 and 0 < cv):
        raise ValueError(f"retention must be in (0, 1) and cv > 0, got {retention}, {cv}")
    ab = (1 - retention) / (cv ** 2 * retention) - 1.0  # a + b of the Beta with that mean and CV
    if ab <= 0:
        raise ValueError(f"no Beta distribution has mean {retention} and cv {cv}; lower cv")
    a, b = retention * ab, (1 - retention) * ab
    sel = (data.samples["tissue"] == tissue).to_numpy()
    if not sel.any():
        raise ValueError(f"no lanes of tissue {tissue!r}")
    X = data.counts.to_numpy().copy()
    p = rng.beta(a, b, (X.shape[0], int(sel.sum())))
    X[:, sel] = rng.binomial(X[:, sel], p)
    data.counts = pd.DataFrame(X, index=data.counts.index, columns=data.counts.columns)
    data.truth["injected"] = {"tissue": tissue, "retention": retention, "cv": cv}
    return data


def lane_dispersion(Y: np.ndarray) -> dict:
    """Per gene over a group of technical-replicate lanes (genes x lanes counts): lane shares s_l = lane total / group
    total; Pearson statistic X2 = sum_l (y_l - s_l y)^2 / (s_l y) against Poisson with df = lanes - 1, its upper tail
    p; the lane-normalised mean m = mean_l(y_l / (L s_l)), its variance v and the moment estimate of the NB dispersion
    phi = (v - m mean_l(1 / (L s_l))) / m^2 (0 under Poisson)."""
    from scipy.stats import chi2

    L = Y.shape[1]
    s = Y.sum(0) / Y.sum()
    tot = Y.sum(1)
    E = tot[:, None] * s[None, :]
    x2 = ((Y - E) ** 2 / np.where(E > 0, E, 1.0)).sum(1)
    N = Y / (L * s)[None, :]
    m, v = N.mean(1), N.var(1, ddof=1)
    pois = m * np.mean(1.0 / (L * s))
    with np.errstate(invalid="ignore", divide="ignore"):
        phi = np.where(m > 0, (v - pois) / m ** 2, np.nan)
        ratio = np.where(pois > 0, v / pois, np.nan)
    return {"x2": x2, "p": chi2.sf(x2, L - 1), "df": L - 1, "mean": m, "var": v, "phi": phi, "ratio": ratio}


@recipe(TRACK, "dossier")
def dossier(data: BulkData, rng, kind: str) -> BulkData:
    """L3 evidence tables computed from the (real or edited) lane counts by the reference analysis
    (`lane_dispersion` per tissue, over all its lanes and over its lanes of one run; a kidney-vs-liver exact Poisson
    test on the pooled lanes)."""
    from scipy.stats import binom, chi2

    X, S, G = data.counts, data.samples, data.genes.set_index("gene_id")
    A = X.to_numpy(float)
    lanes = S.assign(total_counts=A.sum(0).astype(int))
    lanes["share_of_tissue"] = (lanes["total_counts"] / lanes.groupby("tissue")["total_counts"].transform("sum")).round(4)
    groups = []
    for t in ("kidney", "liver"):
        groups.append((t, "all", S.index[S["tissue"] == t].to_numpy()))
        for run in (1, 2):
            idx = S.index[(S["tissue"] == t) & (S["run"] == run)].to_numpy()
            if len(idx) >= 2:
                groups.append((t, f"run {run}", idx))
    summ, bins, top = [], [], []
    for t, lab, idx in groups:
        d = lane_dispersion(A[:, idx])
        k = d["mean"] >= L3_MIN_MEAN
        hi = k & (d["mean"] >= 100)
        lg = k & (d["mean"] >= 20) & (d["var"] > 0)
        slope = float(np.polyfit(np.log10(d["mean"][lg]), np.log10(d["var"][lg]), 1)[0])
        summ.append({"tissue": t, "lanes_used": lab, "n_lanes": len(idx), "df": d["df"], "n_genes_tested": int(k.sum()),
                     "frac_p_below_0.05": round(float(np.mean(d["p"][k] < 0.05)), 4),
                     "frac_p_below_0.01": round(float(np.mean(d["p"][k] < 0.01)), 4),
                     "median_chi2_per_df": round(float(np.median(d["x2"][k])) / d["df"], 3),
                     "poisson_median_chi2_per_df": round(float(chi2.median(d["df"])) / d["df"], 3),
                     "median_var_to_poisson": round(float(np.median(d["ratio"][k])), 3),
                     "median_dispersion_mean_ge_100": round(float(np.median(d["phi"][hi])), 4),
                     "loglog_slope_var_on_mean": round(slope, 3)})
        if lab != "all":
            continue
        for lo, up in L3_BINS:
            b = k & (d["mean"] >= lo) & (d["mean"] < (up or np.inf))
            bins.append({"tissue": t, "mean_count_bin": f"{lo}-{up}" if up else f">={lo}", "n_genes": int(b.sum()),
                         "frac_p_below_0.05": round(float(np.mean(d["p"][b] < 0.05)), 4),
                         "median_var_to_poisson": round(float(np.median(d["ratio"][b])), 3),
                         "median_dispersion": round(float(np.median(d["phi"][b])), 4),
                         "q90_dispersion": round(float(np.quantile(d["phi"][b], 0.9)), 4)})
        order = np.argsort(-np.where(k, d["x2"], -np.inf))[:8]
        for i in order:
            gid = X.index[i]
            top.append({"tissue": t, "gene_id": gid, "chrom": G.loc[gid, "chrom"], "biotype": G.loc[gid, "biotype"],
                        "mean_count_per_lane": round(float(d["mean"][i]), 1), "chi2_per_df": round(float(d["x2"][i]) / d["df"], 2),
                        "p_overdispersed": float(f"{d['p'][i]:.3g}"), "dispersion": round(float(d["phi"][i]), 4)})
    # kidney vs liver: lanes pooled per tissue, exact conditional (binomial) Poisson test given the tissue totals
    kid, liv = (S["tissue"] == "kidney").to_numpy(), (S["tissue"] == "liver").to_numpy()
    yk, yl = A[:, kid].sum(1), A[:, liv].sum(1)
    nk, nl = yk.sum(), yl.sum()
    ok = (yk / kid.sum() >= L3_MIN_MEAN) | (yl / liv.sum() >= L3_MIN_MEAN)
    n, q0 = (yk + yl)[ok], nk / (nk + nl)
    pv = np.minimum(1.0, 2 * np.minimum(binom.cdf(yk[ok], n, q0), binom.sf(yk[ok] - 1, n, q0)))
    lfc = np.log2((yk[ok] / nk * 1e6 + 1) / (yl[ok] / nl * 1e6 + 1))
    sig = false_discovery_control(pv) < 0.05
    contrast = pd.DataFrame([
        {"statistic": "genes_tested (mean >= 5 reads per lane in either tissue)", "value": int(ok.sum())},
        {"statistic": "genes_abs_log2_ratio_gt_1 (kidney vs liver, per million, pooled lanes)", "value": int((np.abs(lfc) > 1).sum())},
        {"statistic": "genes_bh_below_0.05 (exact Poisson test, lane-to-lane variance only)", "value": int(sig.sum())},
        {"statistic": "genes_bh_below_0.05_and_abs_log2_ratio_gt_1", "value": int((sig & (np.abs(lfc) > 1)).sum())},
        {"statistic": "fraction_of_tested_genes_bh_below_0.05", "value": round(float(sig.mean()), 4)},
    ])
    if kind in COMPOSITION_KINDS:  # how the reads of each tissue are spread over its genes, and the per-million ratios
        rows = []
        for t, y in (("kidney", yk), ("liver", yl)):
            top = np.sort(y)[::-1]
            for k in (1, 5, 20):
                rows.append({"statistic": f"{t}_share_of_reads_top{k}_genes (pooled lanes)", "value": round(float(top[:k].sum() / y.sum()), 4)})
        both = ok & (yk > 0) & (yl > 0)
        m = np.log2((yk[both] / nk) / (yl[both] / nl))
        rows += [{"statistic": "median_log2_ratio_kidney_over_liver (per million, tested genes with reads in both)", "value": round(float(np.median(m)), 3)},
                 {"statistic": "fraction_of_those_genes_higher_in_kidney (per million)", "value": round(float(np.mean(m > 0)), 4)}]
        contrast = pd.concat([contrast, pd.DataFrame(rows)], ignore_index=True)
    data.dossier = {"dossier.md": L3_TEXT[kind], "lanes.csv": lanes[["lane", "tissue", "run", "total_counts", "share_of_tissue"]],
                    "lane_dispersion.csv": pd.DataFrame(summ), "dispersion_by_mean.csv": pd.DataFrame(bins),
                    "top_overdispersed_genes.csv": pd.DataFrame(top), "tissue_contrast.csv": contrast}
    return data


_L3_COMMON = [
    "## Data",
    "Marioni et al. (2008, Genome Research 18:1509-1517) extracted RNA from one human kidney sample and one human liver",
    "sample, made one sequencing library from each and sequenced each library on several lanes of an Illumina Genome",
    "Analyzer (36-bp reads): 7 lanes in a first run (kidney 3, liver 4) and 3 lanes in a second run (kidney 2, liver 1).",
    "Reads were mapped and counted per Ensembl gene. This dossier covers the 5,088 genes of chromosomes 1-4 in the",
    "counts as they are distributed with the NOISeq package. The lanes of one tissue are technical replicates: the same",
    "library, sequenced again. There is one biological sample per tissue.",
    "",
    "## Reference analysis",
    "For a group of lanes of one tissue (all its lanes, or its lanes of one run), each lane's share s_l of the group's",
    "reads; for each gene with a mean of >= 5 reads per lane, the Pearson statistic X2 = sum_l (y_l - s_l y)^2 / (s_l y)",
    "against a Poisson model (df = lanes - 1) and its upper-tail p value (overdispersion), the variance of the",
    "share-normalised counts relative to the Poisson expectation, and the moment estimate of a negative-binomial",
    "dispersion phi (variance = mean + phi mean^2; phi = 0 under Poisson). Under Poisson about 5% of genes have",
    "p < 0.05 and the median X2/df is the chi-square median / df. The log-log slope of variance on mean is 1 under",
    "Poisson and approaches 2 when a constant coefficient of variation dominates. Kidney vs liver: lanes pooled per",
    "tissue, exact conditional Poisson (binomial) test of each gene's kidney share against the tissues' read totals,",
    "Benjamini-Hochberg over the tested genes.",
    "",
    "## Tables",
    "- lanes.csv: lane, tissue, run, total_counts, share_of_tissue",
    "- lane_dispersion.csv: per tissue and lane group: genes tested, fraction with p < 0.05 / 0.01, median X2/df and its",
    "  Poisson value, median variance / Poisson variance, median dispersion (genes with mean >= 100), log-log slope",
    "- dispersion_by_mean.csv: the same per mean-count bin (all lanes of a tissue)",
    "- top_overdispersed_genes.csv: the 8 genes with the largest X2 per tissue (all lanes)",
    "- tissue_contrast.csv: the kidney-vs-liver test on the pooled lanes",
]
_L3_QUESTION = [
    "## Question",
    "How do a gene's read counts vary between lanes of the same tissue here, what does that say about the lanes, and",
    "what can these data support about differences between kidney and liver?",
]
L3_TEXT = {k: "\n".join(["# Evidence dossier: lane-to-lane variation of RNA-seq counts, kidney and liver", "",
                         *_L3_COMMON, "", *_L3_QUESTION]) + "\n"
           for k in ("technical_lanes", "liver_lanes")}
COMPOSITION_KINDS = ("composition_native",)
_L3_COMPOSITION = [
    "- tissue_contrast.csv also gives, per tissue, the share of its pooled reads taken by its 1, 5 and 20 most-read genes,",
    "  and, over the tested genes with reads in both tissues, the median log2 ratio kidney / liver of reads per million",
    "  (each tissue's counts divided by its total) and the fraction of those genes with a higher per-million value in kidney",
]
_L3_COMPOSITION_QUESTION = [
    "## Question",
    "Scaled to reads per million, how do the expression levels of a typical gene compare between kidney and liver here,",
    "what explains that, and how should the two tissues' counts be normalised before they are compared?",
]
L3_TEXT["composition_native"] = "\n".join(["# Evidence dossier: lane-to-lane variation of RNA-seq counts, kidney and liver", "",
                                          *_L3_COMMON, *_L3_COMPOSITION, "", *_L3_COMPOSITION_QUESTION]) + "\n"


# ---------------------------------------------------------------- writer

META = {
    "assay": "bulk RNA-seq (poly-A selected, paired-end), reads assigned to genes (featureCounts-style gene counts)",
    "organism": "Homo sapiens",
    "origin": "simulated experiment (negative-binomial counts with a DESeq2-style mean-dispersion trend); gene "
              "identifiers and BRG symbols are synthetic placeholders, XIST and the chrY genes keep their names",
}
SHEET = {"sample": "sample name, as in the counts.tsv header", "index": "i7 index sequence of the library", "condition": "experimental condition",
         "sex": "donor sex recorded at collection (F / M)", "batch": "library-preparation batch",
         "donor": "donor (cell line or individual) the sample comes from",
         "specimen": "RNA specimen (biological sample) the library was made from"}


def counts_text(data: BulkData) -> str:
    """counts.tsv in canonical order: gene rows by gene ID, sample columns by sample name (the order the sheet is
    written in), in every world alike, so no row or column position carries a gene's role, a sample's condition or a
    defect (a duplicated library is not appended last)."""
    X = data.counts
    ids = dict(zip(X.index, data.count_ids or list(X.index)))
    X = X.loc[sorted(X.index), sorted(X.columns)]
    ids = [ids[g] for g in X.index]
    head = "gene_id\t" + "\t".join(X.columns) + "\n"
    if data.integer:
        body = "".join(f"{g}\t" + "\t".join(str(int(v)) for v in row) + "\n" for g, row in zip(ids, X.to_numpy()))
    else:
        body = "".join(f"{g}\t" + "\t".join(f"{v:.4f}" for v in row) + "\n" for g, row in zip(ids, X.to_numpy()))
    text = head + body
    if data.cut_fraction is not None:
        cut = int(len(text) * data.cut_fraction)
        while text[cut - 1] in "\n\t":
            cut += 1
        text = text[:cut]
    return text


TRUE_TOP_K = 20
TRUE_TOP_MIN_MEAN = 10.0   # truly DE genes measurable at all: a mean of >= 10 expected reads per sample


def gold_truth(data: BulkData) -> dict:
    """The generative truth the goldens keep (never a public file): the genes the condition truly changes and their
    true log2 fold changes (test over reference, on molecules), the true top 20 by |true log2FC| among truly DE genes
    with a mean of >= 10 expected reads per sample (the genes a 20-gene qPCR list can be judged on: a gene with a
    handful of reads has a true change no count experiment of this size can rank), and the injected defects."""
    t = dict(data.truth)
    out: dict = {k: t[k] for k in ("a0", "a1", "batch_genes", "shift", "swapped", "duplicates", "degraded_index",
                                   "low_index", "technical_groups", "contaminated", "contaminant_share",
                                   "contaminant_genes", "outcome_filter") if k in t}
    if "de_genes" in t:
        lfc = dict(zip(t["de_genes"], t["de_lfc"]))
        out["de_genes"] = sorted(lfc)
        out["de_lfc"] = {g: lfc[g] for g in sorted(lfc)}
        mean = t.get("mean_count") or {}
        ok = [g for g in lfc if mean.get(g, np.inf) >= TRUE_TOP_MIN_MEAN]
        top = sorted(ok, key=lambda g: (-abs(lfc[g]), g))[:TRUE_TOP_K]
        out["de_lfc_measured"] = {g: lfc[g] for g in sorted(ok)}
        out["top_genes"] = sorted(top)
        out["top_genes_ranked"] = top
    return out


@writer(TRACK)
def write(data: BulkData, w: CanonicalWriter) -> None:
    if data.dossier is not None:
        w.files(data.dossier)
        return
    w.bytes("counts.tsv", counts_text(data).encode())
    sheet = data.samples[data.sheet_columns].sort_values("sample").reset_index(drop=True)
    w.table("samples.csv", sheet)
    gcols = ["gene_id", "symbol", "chrom", "length"] + (["type"] if (data.genes["type"] != "gene").any() else [])
    w.table("genes.tsv", data.genes[gcols].sort_values("gene_id").reset_index(drop=True))
    w.truth(**gold_truth(data))
    meta = {**META, **data.extra_meta,
            "files": {"counts.tsv": "tab-separated; gene_id then one column of raw read counts per sample",
                      "samples.csv": {c: SHEET[c] for c in data.sheet_columns},
                      "genes.tsv": "gene annotation: gene_id, symbol, chrom, length (union-exon length in bp)"
                                   + ("; type (gene or spike_in)" if "type" in gcols else ""),
                      "meta.json": "this description"},
            "values": "raw read counts (non-negative integers), unnormalised",
            "n_samples": int(len(sheet)), "n_genes": int(len(data.genes))}
    if data.task:
        meta["task"] = dict(data.task)
    w.json("meta.json", meta)
