"""Reference solvers of the crispr track (gold side). Every golden is computed from the world's public files.

crispr.L1.integrity     every integrity detector on counts.txt / library.csv / meta.json (truncation, duplicated rows,
                        guide-gene annotation, normalised values posing as counts, a failed (shallow) sample, a
                        bottlenecked initial library, initial/final columns swapped) with the measured sizes and the
                        products the rubric checks (flagged guides/samples, corrected count tables).
crispr.L2.essential     genes whose knockout depletes in one line (worlds.crispr.analysis.essential_analysis):
                        control-normalised, low-count guides filtered, copy-number corrected, gene = median guide LFC,
                        Mann-Whitney against the non-targeting guides, BH; hit = FDR < 5% and LFC <= -0.5.
crispr.L2.selective     dependencies stronger in the query line than the comparison line, each line scaled by its
                        positive-control dynamic range (selective_analysis).
crispr.L2.resistance    genes enriched in the drug arm against the vehicle arm (resistance_analysis).
crispr.L2.guide_level   essential genes of a 4-sgRNA screen (guide_level_analysis): endpoint vs T0 (not the plasmid),
                        sgRNAs with > 1 perfect-match site dropped, non-expressed genes (TPM < 1) untested, median sgRNA
                        LFC + Mann-Whitney against the non-targeting sgRNAs (robust to one outlier sgRNA); the naive side
                        is guide_naive_table (plasmid reference, Fisher-combined sgRNA z-scores, mean LFC).
crispr.L3.dossier       the dossier's key statistics, read back from its tables.

Beside the reference result each L2 golden holds the naive pipeline's result (analysis.naive_table: median
normalisation over all guides, no filter, replicate columns pooled, test against the initial sample, no copy-number
correction, no scaling) so that the rubric can recognise the trap's own answer (zero_if) and name the genes the trap
promotes. Scripted agents: scripted.py.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.suite.registry import naive, oracle, solver
from graders.registry import product_validator
from worlds.crispr import analysis as A

# L1 detector thresholds (calibrated on the real table: Gini of raw counts 0.34-0.38 (MAGeCK's log-count Gini
# 0.07-0.08), < 1% zero guides; samples within 4x)
GINI_BOTTLENECK = 0.6
ZERO_FRACTION_BOTTLENECK = 0.03
LOW_DEPTH_RATIO = 0.12       # a sample with < 12% of the median sample's reads ...
LOW_DEPTH_MEDIAN = 40        # ... and a median below 40 reads per guide has failed
SWAP_PC_LFC = 0.5            # positive controls enriched by more than this in final vs initial: columns swapped


# ---------------------------------------------------------------- L1

def read_raw(world_dir: Path) -> dict:
    d = Path(world_dir)
    text = (d / "counts.txt").read_text()
    lines = text.split("\n")
    header = lines[0].split("\t")
    rows, partial = [], []
    for ln in lines[1:]:
        if not ln.strip():
            continue
        f = ln.split("\t")
        (rows if len(f) == len(header) else partial).append(f)
    df = pd.DataFrame(rows, columns=header)
    samples = header[2:]
    for s in samples:
        df[s] = pd.to_numeric(df[s], errors="coerce")
    import json

    return {"table": df, "samples": samples, "partial": partial, "library": pd.read_csv(d / "library.csv"),
            "meta": json.loads((d / "meta.json").read_text())}


def recover_counts(x: np.ndarray) -> tuple[np.ndarray, float]:
    """Counts from a per-sample rescaling (reads per million or similar): the smallest gap between distinct values is
    one read; refine the unit on the column total."""
    u = np.unique(np.round(x[x > 0], 6))
    gaps = np.diff(u)
    unit = float(gaps[gaps > 0].min()) if len(gaps) else float(u.min())
    est = np.rint(x / unit)
    unit = float(x.sum() / est.sum())
    return np.rint(x / unit), unit


def gini_log(x) -> float:
    """MAGeCK's Gini index (mageck count's QC): the Gini of log(count + 1) with the n - 1 small-sample form."""
    y = np.sort(np.log(np.asarray(x, float) + 1.0))
    n = len(y)
    if n < 2 or y.sum() <= 0:
        return 0.0
    return float(1.0 - 2.0 * (n - (np.arange(1, n + 1) * y).sum() / y.sum()) / (n - 1))


def detect(d: dict) -> dict:
    t, lib, meta, samples = d["table"], d["library"], d["meta"], d["samples"]
    findings: list[str] = []
    v: dict = {"n_rows": int(len(t)), "n_library": int(len(lib)), "samples": samples}

    # 1. truncation: library guides without a complete row
    present = set(t["sgRNA"])
    missing = sorted(set(lib["sgRNA"]) - present)
    v["missing_sgrnas"] = missing
    v["n_missing_sgrnas"] = len(missing)
    v["missing_fraction"] = round(len(missing) / max(len(lib), 1), 4)
    v["n_partial_lines"] = len(d["partial"])
    if missing or d["partial"]:
        findings.append("truncated_table")

    # 2. duplicated rows
    dup = t["sgRNA"].duplicated(keep="first")
    v["n_duplicate_rows"] = int(dup.sum())                       # extra copies (rows to drop)
    every = t["sgRNA"].duplicated(keep=False)
    v["n_duplicate_rows_all_copies"] = int(every.sum())          # every copy of a duplicated sgRNA
    v["duplicated_sgrnas"] = sorted(set(t.loc[dup, "sgRNA"]))
    v["duplicate_fraction"] = round(float(dup.mean()), 4)
    v["duplicate_fraction_all_copies"] = round(float(every.mean()), 4)
    if dup.any():
        findings.append("duplicate_rows")
    t = t[~dup].reset_index(drop=True)

    # 3. guide -> gene annotation against the library
    g_lib = lib.set_index("sgRNA")["Gene"]
    mism = t[t["Gene"].to_numpy() != g_lib.reindex(t["sgRNA"]).to_numpy()]
    mism = mism[mism["sgRNA"].isin(g_lib.index)]
    v["mismatched_sgrnas"] = sorted(mism["sgRNA"])
    v["n_mismatched"] = int(len(mism))
    v["mismatch_fraction"] = round(len(mism) / max(len(t), 1), 4)
    if len(mism):
        findings.append("annotation_mismatch")

    # 4. values: integer read counts?
    X = t[samples].to_numpy(float)
    finite = X[np.isfinite(X)]
    nz = finite[finite != 0]
    frac_int = float(np.mean(np.abs(nz - np.rint(nz)) < 1e-6)) if nz.size else 1.0
    v["fraction_non_integer"] = round(1 - frac_int, 4)
    counts = X.copy()
    if frac_int < 0.99:
        findings.append("normalised_counts")
        units = {}
        for j, s in enumerate(samples):
            counts[:, j], units[s] = recover_counts(np.nan_to_num(X[:, j]))
        v["recovered_units"] = {s: round(u, 6) for s, u in units.items()}
        v["column_sums_before"] = {s: round(float(np.nansum(X[:, j])), 2) for j, s in enumerate(samples)}
    v["corrected_column_sums"] = {s: int(np.nansum(counts[:, j])) for j, s in enumerate(samples)}
    v["corrected_first_guides"] = {str(t["sgRNA"].iloc[i]): {s: int(counts[i, j]) for j, s in enumerate(samples)}
                                   for i in range(min(5, len(t)))}

    # 5. depth per sample
    tot = np.nansum(counts, 0)
    med = np.nanmedian(counts, 0)
    ratio = tot / np.median(tot)
    v["total_reads"] = {s: int(x) for s, x in zip(samples, tot)}
    v["median_reads_per_guide"] = {s: float(x) for s, x in zip(samples, med)}
    low = [s for s, r, m in zip(samples, ratio, med) if r < LOW_DEPTH_RATIO and m < LOW_DEPTH_MEDIAN]
    v["low_depth_samples"] = low
    v["low_depth_ratio"] = round(float(min(ratio)), 4)
    v["low_depth_median"] = float(min(med)) if len(med) else 0.0
    # the mean reads per sgRNA of the shallowest sample: the other standard depth figure (MAGeCK's count summary gives
    # both; blind study 26 reported 21.9 per sgRNA, "median 18")
    shallow = int(np.argmin(ratio))
    v["low_depth_mean"] = round(float(tot[shallow] / max(1, int(np.sum(~np.isnan(counts[:, shallow]))))), 2)
    if low:
        findings.append("low_depth_sample")

    # 6. bottlenecked library: representation skew (Gini index on raw counts, and MAGeCK's Gini on log counts) and
    # sgRNAs without reads, in every sample; the initial samples decide (a final sample is skewed by selection too)
    ini = [s for s in samples if meta["samples"].get(s, {}).get("condition") == "initial"]
    col = {s: counts[:, samples.index(s)] for s in samples}
    fin = {s: x[np.isfinite(x)] for s, x in col.items()}
    v["gini"] = {s: round(A.gini(fin[s]), 4) for s in samples}
    v["gini_log"] = {s: round(gini_log(fin[s]), 4) for s in samples}
    gi = {s: v["gini"][s] for s in ini}
    zf = {s: round(float(np.mean(col[s] == 0)), 4) for s in ini}
    v["initial_gini"] = gi
    v["initial_gini_log"] = {s: v["gini_log"][s] for s in ini}
    v["initial_zero_fraction"] = zf
    bad = [s for s in ini if (gi[s] > GINI_BOTTLENECK or zf[s] > ZERO_FRACTION_BOTTLENECK) and s not in low]
    v["bottlenecked_samples"] = bad
    zero_guides = sorted(set(t["sgRNA"][np.any(counts[:, [samples.index(s) for s in bad]] == 0, axis=1)])) if bad else []
    v["zero_initial_sgrnas"] = zero_guides
    v["n_zero_initial"] = len(zero_guides)
    v["max_initial_gini"] = max(gi.values()) if gi else 0.0
    v["max_initial_gini_log"] = max(v["initial_gini_log"].values()) if gi else 0.0
    v["max_initial_zero_fraction"] = max(zf.values()) if zf else 0.0
    # sgRNAs under 10 reads in an initial sample: the shallow-but-adequate boundary's own measured feature
    v["n_low_initial_guides"] = int(np.sum(np.any([np.nan_to_num(col[s]) < 10 for s in ini], axis=0))) if ini else 0
    if bad:
        findings.append("bottlenecked_library")

    # 7. initial/final swapped: positive controls (core essentials) must deplete from initial to final
    cat = lib.set_index("sgRNA")["category"].reindex(t["sgRNA"]).to_numpy()
    pc, nt = cat == "positive_control", cat == "non_targeting"
    v["positive_control_lfc"] = {}
    swapped_lines = []
    lines = sorted({meta["samples"][s]["cell_line"] for s in samples if s in meta["samples"]})
    corrected = {s: s for s in samples}
    for line in lines:
        si = [s for s in samples if meta["samples"].get(s, {}).get("cell_line") == line and meta["samples"][s]["condition"] == "initial"]
        sf_ = [s for s in samples if meta["samples"].get(s, {}).get("cell_line") == line and meta["samples"][s]["condition"] == "final"]
        if not (si and sf_) or not pc.any() or not nt.any():
            continue
        a, b = counts[:, samples.index(si[0])], counts[:, samples.index(sf_[0])]
        ok = np.isfinite(a) & np.isfinite(b)
        k = np.median(b[nt & ok] + 1) / np.median(a[nt & ok] + 1)
        lfc = np.log2((b + 1) / k / (a + 1))
        val = float(np.median(lfc[pc & ok]))
        v["positive_control_lfc"][line] = round(val, 4)
        if val > SWAP_PC_LFC:
            swapped_lines.append(line)
            corrected[si[0]], corrected[sf_[0]] = sf_[0], si[0]
    v["swapped_lines"] = swapped_lines
    v["n_swapped_samples"] = 2 * len(swapped_lines)
    if swapped_lines:
        findings.append("swapped_samples")
        # the column now named s holds what was written under corrected[s]... i.e. write column s under its true name
        v["corrected_column_sums"] = {corrected[s]: v["corrected_column_sums"][s] for s in samples}
        v["corrected_first_guides"] = {g: {corrected[s]: x for s, x in row.items()} for g, row in v["corrected_first_guides"].items()}
        v["swapped_pc_lfc"] = max(v["positive_control_lfc"][ln] for ln in swapped_lines)
    return {"findings": sorted(findings), **v}


@solver("crispr.L1.integrity", version="4")
def l1_integrity(world_dir: Path, world) -> dict:
    return detect(read_raw(world_dir))


@product_validator("crispr.corrected_counts")
def corrected_counts(path: Path, golden: dict, check) -> tuple[float, str]:
    """A corrected count table (MAGeCK layout: sgRNA, Gene and one column per sample, tab- or comma-separated): every
    sample column must hold integers whose sum matches the reference's corrected column sum (within 0.5%; where the
    copy drops up to 1% of the rows, at most that sum and at least half of it), under the right sample name, and the
    first guides' counts must match (within 1 read or 1%)."""
    want = golden.get("corrected_column_sums") or {}
    try:
        tab = pd.read_csv(path, sep=None, engine="python")
    except Exception as exc:  # noqa: BLE001 - any unreadable product earns nothing, with the reason
        return 0.0, f"not a readable table ({exc})"
    miss = [s for s in want if s not in tab.columns]
    if miss:
        return 0.0, f"sample columns missing: {miss}"
    bad = []
    # a copy may also drop a few rows, another problem it handled (one jackpot guide holding a fifth of a sample's
    # reads, blind study 16): each column may then sum lower by what those rows held, never higher
    n_rows = int(golden.get("n_rows") or 0)
    n_copy = int(tab["sgRNA"].nunique()) if "sgRNA" in tab.columns else len(tab)
    dropped = 0 < n_rows - n_copy <= max(2, int(0.01 * n_rows))
    for s, tot in want.items():
        x = pd.to_numeric(tab[s], errors="coerce").to_numpy(float)
        total = np.nansum(x)
        if not np.all(np.abs(x[np.isfinite(x)] - np.rint(x[np.isfinite(x)])) < 1e-6):
            bad.append(f"{s} not integer")
        elif dropped and 0.5 * tot <= total <= tot + 0.005 * max(tot, 1):
            continue
        elif abs(total - tot) > 0.005 * max(tot, 1):
            bad.append(f"{s} sums to {total:.0f}, expected {tot}" + (f" ({n_rows - n_copy} rows dropped)" if dropped else ""))
    first = golden.get("corrected_first_guides") or {}
    if "sgRNA" in tab.columns:
        idx = tab.drop_duplicates("sgRNA").set_index("sgRNA")
        for g, row in first.items():
            for s, x in row.items():
                if g in idx.index and abs(float(idx.loc[g, s]) - x) > max(1.0, 0.01 * x):
                    bad.append(f"{g}/{s} = {idx.loc[g, s]}, expected {x}")
    return (0.0, "; ".join(bad[:4])) if bad else (1.0, f"{len(want)} sample columns match the reference correction")


# ---------------------------------------------------------------- L2

def _l2_golden(d: dict, kind: str, world, exclude: set | None = None) -> dict:
    fn = {"essential": A.essential_analysis, "selective": A.selective_analysis, "resistance": A.resistance_analysis,
          "guide_level": A.guide_level_analysis}[kind]
    direction = "up" if kind == "resistance" else "down"
    t, info = fn(d)
    hits = A.hits_of(t, direction)
    nt = A.guide_naive_table(d) if kind == "guide_level" else A.naive_table(d)
    naive_hits = A.hits_of(nt, direction)
    defect = getattr(world, "defect", None)
    ref = t.set_index("gene")
    nv = nt.set_index("gene")
    promoted = sorted(set(naive_hits) - set(hits))
    missed = sorted(set(hits) - set(naive_hits))
    # genes the reference tested (>= MIN_GUIDES guides left after the initial-count filter): a gene left untested has
    # no reference effect size, and the prompt asks for one row per TESTED gene, so only tested genes are value-checked
    tested = set(ref.index[ref["n_guides"] >= A.MIN_GUIDES])
    # null genes: the clearest non-hits (reference FDR > 0.5 and |LFC| small), used on clean controls as decoys and
    # in every world as the genes whose LFC the table must get right
    null = ref[(ref["fdr"] > 0.5) & (ref["lfc"].abs() < 0.3) & ~ref.index.isin(sorted(exclude or []))
               & ref.index.isin(sorted(tested))]
    null = null.sort_values(["fdr", "lfc"], ascending=[False, True])
    nulls = sorted(null.index[:10])
    contrast = sorted((set(hits) | set(promoted) | set(nulls)) & tested)
    inter = len(set(hits) & set(naive_hits))
    f1 = 2 * inter / (len(hits) + len(naive_hits)) if hits or naive_hits else 1.0
    out = {
        "hits": hits, "n_hits": len(hits), "direction": direction,
        "gene_lfc": {g: round(float(ref.loc[g, "lfc"]), 4) for g in contrast if g in ref.index},
        "gene_fdr": {g: float(f"{ref.loc[g, 'fdr']:.4g}") for g in sorted(ref.index)},
        "trap_hits": naive_hits if defect else [],
        "trap_lfc": {g: round(float(nv.loc[g, "lfc"]), 4) for g in contrast if g in nv.index} if defect else {},
        "trap_promoted": {g: 1.0 for g in promoted} if defect else {},
        "decoys": {g: 1.0 for g in (promoted if defect and promoted else nulls)},
        "naive_hits": naive_hits, "n_naive_hits": len(naive_hits), "naive_missed": missed,
        "naive_reference_f1": round(f1, 3),
        "naive_lfc_shift": round(float(np.median(nv.reindex(nulls)["lfc"] - ref.reindex(nulls)["lfc"])), 3) if nulls else 0.0,
        "top_hits": list(t[t["gene"].isin(hits)].sort_values("lfc" if direction == "down" else "fdr")["gene"].head(5)),
        "info": info,
    }
    return out


@solver("crispr.L2.essential", version="3")
def l2_essential(world_dir: Path, world) -> dict:
    d = A.read_screen(world_dir)
    out = _l2_golden(d, "essential", world)
    # extra diagnostics a careful analyst reads (pivotal records)
    line = d["meta"]["task"]["cell_line"]
    g_all = A.guide_lfc(d, line, "final", "initial", controls_norm=False)
    g_ctl = A.guide_lfc(d, line, "final", "initial", controls_norm=True)
    nt = g_ctl["category"] == "non_targeting"
    out["nt_median_lfc_median_norm"] = round(float(g_all.loc[nt, "lfc"].median()), 3)
    out["depleted_guide_fraction"] = round(float((g_ctl.loc[g_ctl["category"] == "targeting", "lfc"] < -1).mean()), 3)
    out["n_low_initial_guides"] = int((g_ctl["initial"] < A.MIN_INITIAL).sum())
    out["amplified_genes"] = out["info"].get("amplified_genes", [])
    return out


@solver("crispr.L2.selective", version="3")
def l2_selective(world_dir: Path, world) -> dict:
    d = A.read_screen(world_dir)
    out = _l2_golden(d, "selective", world)
    task = d["meta"]["task"]
    out["query_line"], out["comparison_line"] = task["query_line"], task["comparison_line"]
    out["dynamic_range"] = {k: v["scale"] for k, v in out["info"].items()}
    out["amplified_genes"] = sorted(set().union(*[set(v.get("amplified_genes", [])) for v in out["info"].values()]))
    low = {}
    for line in (task["query_line"], task["comparison_line"]):
        g = A.guide_lfc(d, line, "final", "initial")
        low[line] = int((g["initial"] < A.MIN_INITIAL).sum())
    out["n_low_initial_guides"] = low[task["query_line"]]
    return out


@solver("crispr.L2.resistance", version="3")
def l2_resistance(world_dir: Path, world) -> dict:
    d = A.read_screen(world_dir)
    line = d["meta"]["task"]["cell_line"]
    veh = A.gene_test(A.guide_lfc(d, line, "vehicle", "initial"), "up")
    # null genes must be null in the vehicle arm too (a gene depleted in both arms is no drug effect, but it is no
    # clear non-hit either)
    out = _l2_golden(d, "resistance", world, exclude=set(veh[veh["lfc"].abs() >= 0.3]["gene"]))
    out["vehicle_enriched"] = A.hits_of(veh, "up")
    g_all = A.guide_lfc(d, line, "drug", "initial", controls_norm=False)
    out["nt_median_lfc_median_norm"] = round(float(g_all.loc[g_all["category"] == "non_targeting", "lfc"].median()), 3)
    g_dv = A.guide_lfc(d, line, "drug", "vehicle")
    out["drug_depleted_guide_fraction"] = round(float((g_dv.loc[g_dv["category"] == "targeting", "lfc"] < -1).mean()), 3)
    return out


@solver("crispr.L2.guide_level", version="2")  # 2: mean-driven genes, multi-match sgRNA count (nuisance sizes)
def l2_guide_level(world_dir: Path, world) -> dict:
    """Essential genes of a 4-guide screen with plasmid, T0 and final samples (analysis.guide_level_analysis), plus the
    diagnostics a careful analyst reads: sgRNA agreement within genes, multi-match sgRNAs, depletion of non-expressed
    genes, and the plasmid -> T0 skew."""
    d = A.read_screen(world_dir)
    out = _l2_golden(d, "guide_level", world)
    out.update(A.guide_diagnostics(d))
    return out


HIT_RECALL = 0.7


@product_validator("crispr.hit_calls")
def hit_calls(path: Path, golden: dict, check) -> tuple[float, str]:
    """The hit calls of a per-gene table (columns gene, lfc and fdr), by the prompt's hit rule (fdr < 0.05 and lfc <= -0.5;
    for enrichment screens lfc >= +0.5): the reference hits are called (>= 70% of them) AND the genes of the golden
    mapping the check names (`trap_promoted`: genes the trap calls hits that the reference does not; `decoys`: clear
    non-hits) are not (not called, or left out as untested, for >= 80% of them). In a simulated world (golden `truth`)
    the first half reads the generative true hits instead: >= 70% called, or the reference's own recall of them less
    0.1 where that is lower. Both halves must hold, so a table that
    gives every gene the same values cannot pass, and a small but significant residual effect below the effect-size
    threshold is not counted as a call."""
    from graders.checks import read_table

    fdr, why = read_table(Path(path), "gene", "fdr")
    if fdr is None:
        return 0.0, why
    lfc, why = read_table(Path(path), "gene", "lfc")
    if lfc is None:
        return 0.0, why
    up = golden.get("direction") == "up"

    def called(g: str) -> bool:
        e = lfc.get(g)
        if e is None or not fdr.get(g, 1.0) < 0.05:
            return False
        return e >= A.MIN_EFFECT if up else e <= -A.MIN_EFFECT

    truth = (golden.get("truth") or {}).get("hits")
    null = [g.lower() for g in (golden.get(check.golden) or {})]
    nul = sum(not called(g) for g in null) / len(null) if null else 1.0
    if truth is not None:
        # simulated world: recall of the generative truth, with the reference's own recall (less 0.1) as the bar
        hits = [g.lower() for g in truth]
        ref = {g.lower() for g in golden.get("hits") or []}
        ref_rec = sum(g in ref for g in hits) / len(hits) if hits else 1.0
        need = min(HIT_RECALL, ref_rec - 0.1)
        what = f"true hits (the reference recovers {ref_rec:.0%})"
    else:
        hits, need, what = [g.lower() for g in golden.get("hits") or []], HIT_RECALL, "reference hits"
    sig = sum(called(g) for g in hits) / len(hits) if hits else 1.0
    ok = sig >= need - 1e-9 and nul >= 0.8
    return float(ok), (f"{sig:.0%} of the {len(hits)} {what} called (need {need:.0%}); {nul:.0%} of the {len(null)} "
                       f"{check.golden} genes not called (need 80%)")


# ---------------------------------------------------------------- L3

@solver("crispr.L3.dossier", version="1")
def l3_dossier(world_dir: Path, world) -> dict:
    g = pd.read_csv(Path(world_dir) / "gene_summary.csv")
    out = {}
    for line, sub in g.groupby("cell_line", sort=True):
        sig = sub[(sub["fdr"] < 0.05) & (sub["median_lfc"] < 0)].sort_values("median_lfc")
        out[f"{line}_hits"] = sig["gene"].tolist()
        out[f"{line}_median_lfc"] = {r.gene: float(r.median_lfc) for r in sub.itertuples()}
    pv = g.pivot(index="gene", columns="cell_line", values="median_lfc")
    diff = (pv["KBM7"] - pv["HL60"]).sort_values()
    out["most_kbm7_selective"] = diff.index[:5].tolist()
    out["most_hl60_selective"] = diff.index[::-1][:5].tolist()
    return out


from worlds.crispr import scripted  # noqa: E402,F401  (registers the scripted agents)
