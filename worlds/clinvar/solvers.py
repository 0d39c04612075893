"""Reference solvers of the clinvar track (gold side). Every golden is computed from the world's public files.

clinvar.L1.integrity       every integrity detector on calls.vcf.gz + meta.json: bgzip truncation (no EOF block /
                           incomplete member; complete records vs the n_records meta.json states), contigs not
                           declared in the header, duplicated records, coordinate order (records to move = n - LIS),
                           INFO/FORMAT tags used but not defined, INFO AC/AN disagreeing with the genotypes, and
                           Mendelian consistency of the declared trios (a swapped sample is the column that fits the
                           trio instead), records not in parsimonious form (a padding base all alleles share, Tan
                           et al. 2015), and a contaminated sample (>= 2% of its hom-ref SNV calls at depth >= 10 with
                           >= 5% ALT reads), records past their contig's declared length (positions of another
                           build than the header's), and a duplicated individual (a sample pair with KING-robust
                           kinship > 0.354). Findings, measured sizes, and what the products are checked against.
clinvar.L2.frequency_filter  the proband's candidates: non-reference genotype and filtering AF (max of the 1000
                           Genomes global and continental AFs, whichever tags the header says are 1000 Genomes; an
                           absent tag = 0) below task.max_allele_frequency (gnomAD popmax practice). Refuses a world
                           where a carried variant's popmax or global AF lies within 1.5x of the cut-off, where the
                           text, float32 and bcftools readings disagree, or where the Whiffin faf95 decides otherwise.
                           Also the trap list: the same filter on INFO/AF (whatever it holds).
clinvar.L2.carrier_screen  per P/LP entry of clinvar_like.tsv: confident carriers (GT carries that exact allele after
                           splitting multi-allelic records, GQ >= 20 and DP >= 10), contigs matched across naming
                           conventions (22 = chr22). Refuses a world with a carrier call between clearly confident
                           (GQ >= 30, DP >= 10) and clearly low (GQ < 10, DP < 6), where standard filters would differ. Also the trap counts (string match of the record as written, any
                           non-reference GT, no GQ/DP check).
clinvar.L2.reportable_findings  the proband's findings: exact allele match, aggregate significance P/LP (not
                           conflicting), popmax AF < 0.05 (BA1). Also the trap list (position join, substring
                           'pathogenic', no frequency check). BA1 is AF > 5% (ClinGen: in a population of >= 2,000
                           alleles); every carried P/LP entry has popmax <= 0.033 or global AF >= 0.075, else refused.
clinvar.L2.inheritance     per candidate gene of a trio: the proband's gene copies hit (homozygous = 2; hets phased by
                           transmission, one from each parent = 2), the gene's mode (AR: 2 copies; AD with unaffected
                           parents: a de novo with both parents hom-ref on reliable calls, GQ >= 20, DP >= 10, no ALT
                           read). Refuses a world with a candidate call between clearly confident and clearly low.
clinvar.L3.dossier         the dossier's statistics read back from its tables.

Scripted agents (scripted.py): oracle = these analyses run in the sandbox (helpers inlined); naive = tool defaults.
"""
from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.suite.registry import product_maker, solver
from graders.registry import product_validator

VCF = "calls.vcf.gz"
BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
POP_TAGS = ("AF", "AFR_AF", "AMR_AF", "ASN_AF", "EUR_AF")
PLP = ("Pathogenic", "Likely_pathogenic", "Pathogenic/Likely_pathogenic")
MIN_GQ, MIN_DP = 20, 10
BA1_AF = 0.05
CONFLICTING = "Conflicting_interpretations_of_pathogenicity"
MENDEL_FINDING = 0.08
CONTAM_AB = 0.05          # a hom-ref call (depth >= 10) whose reads are >= 5% ALT
CONTAM_FINDING = 0.02     # flagged when >= 2% of a sample's hom-ref calls are such (real samples here: <= 0.2%)
B37_LENGTHS = {"22": 51304566}    # GRCh37 chromosome 22 (the only contig of these call sets)
KING_DUPLICATE = 0.354    # KING kinship above 2^-1.5: duplicate sample or monozygotic twin (Manichaikul et al. 2010)


# ---------------------------------------------------------------- reading (robust to truncation, plain or gz)

# what a VCF may inflate to (graders.product_io.MAX_INFLATED_BYTES; a literal here, since read_text also runs in the
# sandbox, in the clinvar oracle's cells, where no gold-side module imports)
MAX_VCF_INFLATED = 256 << 20


def read_text(path) -> tuple[str, bool]:
    """Text of a VCF (plain, gzip or bgzip) and whether the compressed stream is complete (False when truncated or
    without the BGZF EOF block). Decompresses member by member, keeping whatever a truncated member yields."""
    raw = Path(path).read_bytes()
    if raw[:2] != b"\x1f\x8b":
        return raw.decode("utf-8", errors="replace"), True
    out, pos, complete, total = [], 0, True, 0
    while pos < len(raw):
        d = zlib.decompressobj(31)
        try:
            chunk = d.decompress(raw[pos:], MAX_VCF_INFLATED - total + 1)
        except zlib.error:
            complete = False
            break
        total += len(chunk)
        if total > MAX_VCF_INFLATED:  # an agent's corrected copy is read here too: a bomb is refused, not inflated
            raise ValueError(f"decompresses to more than {MAX_VCF_INFLATED >> 20} MiB")
        out.append(chunk)
        if not d.eof:
            complete = False
            break
        used = len(raw) - pos - len(d.unused_data)
        pos += used
    if complete and not raw.endswith(BGZF_EOF):
        complete = False
    return b"".join(out).decode("utf-8", errors="replace"), complete


def read_vcf(path) -> dict:
    text, complete = read_text(path)
    lines = text.split("\n")
    partial = lines[-1] != ""          # an unterminated last line is an incomplete record
    if partial:
        lines = lines[:-1]
    header, cols, rows = [], [], []
    for ln in lines:
        if not ln:
            continue
        if ln.startswith("##"):
            header.append(ln)
        elif ln.startswith("#"):
            cols = ln[1:].split("\t")
        else:
            f = ln.split("\t")
            if len(f) >= 8:
                rows.append(f)
    return {"header": header, "samples": cols[9:], "rows": rows, "complete": complete and not partial}


def info_dict(info: str) -> dict:
    out = {}
    for kv in info.split(";"):
        if kv and kv != ".":
            k, _, v = kv.partition("=")
            out[k] = v
    return out


def gt_alleles(row: list, i: int) -> list:
    keys = row[8].split(":")
    vals = row[9 + i].split(":")
    g = vals[keys.index("GT")] if "GT" in keys and keys.index("GT") < len(vals) else "./."
    return g.replace("|", "/").split("/")


def sample_fields(row: list, i: int) -> dict:
    return dict(zip(row[8].split(":"), row[9 + i].split(":")))


def norm_chrom(c: str) -> str:
    return c[3:] if c.lower().startswith("chr") else c


def vkey(row: list, alt: str | None = None, chrom: str | None = None) -> str:
    return f"{chrom if chrom is not None else row[0]}:{row[1]}:{row[3]}:{alt if alt is not None else row[4]}"


def header_ids(header: list, kind: str) -> set:
    out = set()
    for h in header:
        if h.startswith(f"##{kind}=<ID="):
            out.add(h[len(f"##{kind}=<ID="):].split(",")[0].rstrip(">"))
    return out


def genotype_counts(row: list, n: int) -> tuple[list, int]:
    ac = [0] * len(row[4].split(","))
    an = 0
    for i in range(n):
        for a in gt_alleles(row, i):
            if a == ".":
                continue
            an += 1
            if a != "0" and a.isdigit() and int(a) <= len(ac):
                ac[int(a) - 1] += 1
    return ac, an


def lis_length(xs: list) -> int:
    import bisect

    tails: list = []
    for x in xs:
        j = bisect.bisect_right(tails, x)
        if j == len(tails):
            tails.append(x)
        else:
            tails[j] = x
    return len(tails)


def dosage(row: list, i: int) -> int:
    """Non-reference allele count of sample i (-1 when not called)."""
    al = gt_alleles(row, i)
    if any(a == "." for a in al):
        return -1
    return sum(a != "0" for a in al)


def mendel_errors(rows: list, samples: list, child: str, parents: list) -> tuple[int, int]:
    c, f, m = (samples.index(x) for x in (child, *parents))
    err = inf = 0
    for r in rows:
        if "," in r[4]:
            continue
        g = [dosage(r, c), dosage(r, f), dosage(r, m)]
        if min(g) < 0 or max(g) == 0:
            continue
        inf += 1
        opts = {0: [0], 1: [0, 1], 2: [1]}
        ok = any(a + b == g[0] for a in opts[g[1]] for b in opts[g[2]])
        err += not ok
    return err, inf


def trim_alleles(pos: int, ref: str, alts: list) -> tuple:
    """Parsimonious representation without a reference (Tan et al. 2015): drop the last base while every allele is
    longer than one base and all end in the same base, then the first base likewise (POS moves right)."""
    al = [ref, *alts]
    while all(len(a) > 1 for a in al) and len({a[-1] for a in al}) == 1:
        al = [a[:-1] for a in al]
    while all(len(a) > 1 for a in al) and len({a[0] for a in al}) == 1:
        al = [a[1:] for a in al]
        pos += 1
    return pos, al[0], al[1:]


def read_balance(rows: list, i: int, min_depth: int = 10) -> tuple:
    """Sample i at biallelic SNV records with AD depth >= min_depth: ALT read fractions of its hom-ref calls and of its
    heterozygous calls (numpy arrays)."""
    hr, ab = [], []
    for r in rows:
        if len(r[3]) != 1 or len(r[4]) != 1 or len(r) <= 9 + i:     # biallelic SNVs (indel reads are ambiguous)
            continue
        f = sample_fields(r, i)
        try:
            ad = [int(x) for x in f.get("AD", ".").split(",")]
        except ValueError:
            continue
        depth = sum(ad)
        if len(ad) != 2 or depth < min_depth:
            continue
        g = f.get("GT", "./.").replace("|", "/")
        if g == "0/0":
            hr.append(ad[1] / depth)
        elif g in ("0/1", "1/0"):
            ab.append(ad[1] / depth)
    return np.array(hr), np.array(ab)


def contig_lengths(header: list) -> tuple:
    """##contig lines: ID -> length and ID -> assembly (where stated)."""
    lengths, assembly = {}, {}
    for h in header:
        if h.startswith("##contig=<"):
            kv = dict(x.split("=", 1) for x in h[len("##contig=<"):].rstrip(">").split(",") if "=" in x)
            if "ID" in kv and kv.get("length", "").isdigit():
                lengths[kv["ID"]] = int(kv["length"])
            if "ID" in kv and "assembly" in kv:
                assembly[kv["ID"]] = kv["assembly"]
    return lengths, assembly


def pairwise_relatedness(rows: list, samples: list) -> list:
    """Every sample pair over the biallelic records where both are called: KING-robust kinship (Manichaikul et al.
    2010: (N_het,het - 2 N_opposite-hom) / (N_het(a) + N_het(b))), genotype concordance at sites where either carries
    the ALT allele, the IBS2 share over every co-called site (bcftools gtcheck's 1 - discordance) and the IBS0 share
    (opposite homozygotes). Rounded to 4 digits."""
    bi = [r for r in rows if "," not in r[4]]
    G = np.array([[dosage(r, i) for i in range(len(samples))] for r in bi]).reshape(len(bi), len(samples))
    out = []
    for a in range(len(samples)):
        for b in range(a + 1, len(samples)):
            x, y = G[:, a], G[:, b]
            ok = (x >= 0) & (y >= 0)
            x, y = x[ok], y[ok]
            het_a, het_b = int((x == 1).sum()), int((y == 1).sum())
            hh = int(((x == 1) & (y == 1)).sum())
            opp = int((np.abs(x - y) == 2).sum())
            inf = (x > 0) | (y > 0)
            out.append({"a": samples[a], "b": samples[b],
                        "kinship": round((hh - 2 * opp) / max(het_a + het_b, 1), 4),
                        "concordance": round(float((x[inf] == y[inf]).mean()) if inf.any() else 0.0, 4),
                        "ibs2_share": round(float((x == y).mean()) if len(x) else 0.0, 4),
                        "ibs0": round(opp / max(len(x), 1), 4)})
    return out


# ---------------------------------------------------------------- L1 detectors

def detect(vcf: dict, meta: dict) -> dict:
    rows, header, samples = vcf["rows"], vcf["header"], vcf["samples"]
    findings: list = []
    v: dict = {"n_records_read": len(rows), "n_samples": len(samples)}
    declared = meta.get("n_records")

    # 1. truncated bgzip
    v["stream_complete"] = bool(vcf["complete"])
    v["n_records_declared"] = declared
    missing = (declared - len(rows)) if declared is not None else 0
    v["n_missing_records"] = int(missing) if not vcf["complete"] else 0
    v["missing_fraction"] = round(v["n_missing_records"] / declared, 4) if declared else 0.0
    if not vcf["complete"]:
        findings.append("truncated_file")

    # 2. contigs not declared in the header
    contigs = header_ids(header, "contig")
    bad = [r for r in rows if r[0] not in contigs]
    v["n_undeclared_contig_records"] = len(bad)
    v["undeclared_fraction"] = round(len(bad) / max(len(rows), 1), 4)
    v["undeclared_contigs"] = sorted({r[0] for r in bad})
    if bad:
        findings.append("contig_naming")

    # 3. duplicated records (same CHROM/POS/REF/ALT, contig naming normalised)
    keys = [vkey(r, chrom=norm_chrom(r[0])) for r in rows]
    seen, dups = set(), []
    for k in keys:
        if k in seen:
            dups.append(k)
        seen.add(k)
    v["n_duplicate_records"] = len(dups)                    # extra copies (records to remove)
    v["duplicate_fraction"] = round(len(dups) / max(len(rows), 1), 4)
    counts: dict = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    v["n_records_in_duplicates"] = sum(c for c in counts.values() if c > 1)     # both copies (records involved)
    v["records_in_duplicates_fraction"] = round(v["n_records_in_duplicates"] / max(len(rows), 1), 4)
    v["duplicated_keys"] = sorted(set(dups))
    if dups:
        findings.append("duplicate_records")
    v["unique_keys"] = sorted(seen, key=lambda k: (k.split(":")[0], int(k.split(":")[1]), k))
    v["n_unique_records"] = len(seen)
    v["uncarried_trim"] = uncarried_trim(rows, len(samples))

    # 4. coordinate order (per normalised contig, duplicates allowed)
    pos = [(norm_chrom(r[0]), int(r[1])) for r in rows]
    breaks = sum(1 for a, b in zip(pos, pos[1:]) if b < a)
    v["n_order_breaks"] = breaks
    v["n_displaced_records"] = len(pos) - lis_length(pos)
    v["displaced_fraction"] = round(v["n_displaced_records"] / max(len(rows), 1), 4)
    running, below = None, 0                      # records below a position seen earlier (the records out of place)
    for p in pos:
        if running is not None and p < running:
            below += 1
        running = p if running is None or p > running else running
    v["n_records_below_earlier"] = below
    if breaks:
        findings.append("unsorted_records")

    # 5. tags used but not defined in the header
    info_def, fmt_def = header_ids(header, "INFO"), header_ids(header, "FORMAT")
    info_used, fmt_used = set(), set()
    for r in rows:
        info_used |= set(info_dict(r[7]))
        if len(r) > 8:
            fmt_used |= set(r[8].split(":"))
    undefined = sorted({f"INFO/{t}" for t in info_used - info_def} | {f"FORMAT/{t}" for t in fmt_used - fmt_def})
    v["undefined_tags"] = undefined
    v["n_undefined_tags"] = len(undefined)
    if undefined:
        findings.append("missing_header_definitions")

    # 6. INFO AC/AN against the genotypes
    stale = []
    for r in rows:
        d = info_dict(r[7])
        if "AC" not in d or "AN" not in d:
            continue
        ac, an = genotype_counts(r, len(samples))
        if d["AC"] != ",".join(map(str, ac)) or d["AN"] != str(an):
            stale.append(vkey(r, chrom=norm_chrom(r[0])))
    v["n_nonref_genotypes"] = sum(1 for r in rows for i in range(len(samples)) if dosage(r, i) > 0)
    v["n_stale_records"] = len(stale)
    v["stale_fraction"] = round(len(stale) / max(len(rows), 1), 4)
    if len(stale) > 0.01 * len(rows):
        findings.append("stale_info_counts")

    # 7. declared trios: Mendelian consistency; a swapped column is the one that fits the trio instead
    v["trio_error_rates"] = {}
    swapped: list = []
    worst = 0.0
    for t in meta.get("trios", []):
        child, parents = t["child"], t["parents"]
        if not all(s in samples for s in (child, *parents)):
            continue
        e, n = mendel_errors(rows, samples, child, parents)
        rate = e / max(n, 1)
        v["trio_error_rates"][child] = round(rate, 4)
        if rate > MENDEL_FINDING:
            worst = max(worst, rate)
            fits = []
            for s in samples:
                if s in (child, *parents):
                    continue
                e2, n2 = mendel_errors(rows, samples, s, parents)
                fits.append((e2 / max(n2, 1), s))
            best = min(fits)
            swapped += [child, best[1]] if best[0] < MENDEL_FINDING else [child]
    v["swapped_samples"] = sorted(set(swapped))
    v["n_swapped_samples"] = len(set(swapped))
    v["mendelian_error_rate"] = round(worst, 4)
    if swapped:
        findings.append("sample_swap")

    # 8. indel representation: records not in parsimonious form (a padding base every allele shares; Tan et al. 2015)
    unnorm = []
    for r in rows:
        alts = r[4].split(",")
        if trim_alleles(int(r[1]), r[3], alts) != (int(r[1]), r[3], alts):
            unnorm.append(vkey(r, chrom=norm_chrom(r[0])))
    v["n_unnormalized_records"] = len(unnorm)
    v["unnormalized_fraction"] = round(len(unnorm) / max(len(rows), 1), 4)
    v["unnormalized_keys"] = sorted(set(unnorm))
    if unnorm:
        findings.append("unnormalized_indels")

    # 9. cross-sample contamination: hom-ref calls carrying ALT reads, heterozygous allele balance off 0.5
    v["homref_alt_read_fraction"], v["het_allele_balance"] = {}, {}
    contaminated = []
    for i, s in enumerate(samples):
        hr, ab = read_balance(rows, i)
        v["homref_alt_read_fraction"][s] = round(float(np.mean(hr >= CONTAM_AB)), 4) if len(hr) else 0.0
        v["het_allele_balance"][s] = round(float(np.median(ab)), 3) if len(ab) else None
        if len(hr) and v["homref_alt_read_fraction"][s] >= CONTAM_FINDING:
            contaminated.append(s)
    v["contaminated_samples"] = sorted(contaminated)
    v["n_contaminated_samples"] = len(contaminated)
    v["max_homref_alt_read_fraction"] = max(v["homref_alt_read_fraction"].values(), default=0.0)
    if contaminated:
        findings.append("sample_contamination")

    # 10. reference build: records past the end the header declares for their contig (positions of another build)
    lengths, assembly = contig_lengths(header)
    beyond = [r for r in rows if r[0] in lengths and int(r[1]) > lengths[r[0]]]
    v["declared_assembly"] = sorted(set(assembly.values()))
    v["n_records_beyond_contig_end"] = len(beyond)
    v["beyond_end_fraction"] = round(len(beyond) / max(len(rows), 1), 4)
    v["max_pos_beyond_end"] = max((int(r[1]) for r in beyond), default=0)
    v["beyond_end_keys"] = sorted({vkey(r, chrom=norm_chrom(r[0])) for r in beyond})
    if beyond:
        findings.append("build_mismatch")

    # 11. sample identity: pairwise KING-robust kinship and genotype concordance of every sample pair
    pairs = pairwise_relatedness(rows, samples)
    dup = [p for p in pairs if p["kinship"] > KING_DUPLICATE]
    v["max_pair_kinship"] = max((p["kinship"] for p in pairs), default=0.0)
    v["duplicate_samples"] = sorted({s for p in dup for s in (p["a"], p["b"])})
    v["n_duplicate_samples"] = len(v["duplicate_samples"])
    v["n_duplicate_pairs"] = len(dup)
    v["duplicate_kinship"] = max((p["kinship"] for p in dup), default=0.0)
    v["duplicate_concordance"] = max((p["concordance"] for p in dup), default=0.0)
    v["duplicate_ibs2_share"] = max((p["ibs2_share"] for p in dup), default=0.0)
    v["duplicate_ibs0"] = max((p["ibs0"] for p in dup), default=0.0)
    v["max_nonduplicate_kinship"] = max((p["kinship"] for p in pairs if p not in dup), default=0.0)
    if dup:
        findings.append("duplicate_individual")
    return {"findings": sorted(findings), **v}


@solver("clinvar.L1.integrity", version="6")
def l1_integrity(world_dir: Path, world) -> dict:
    world_dir = Path(world_dir)
    meta = json.loads((world_dir / "meta.json").read_text())
    return detect(read_vcf(world_dir / VCF), meta)


# ---------------------------------------------------------------- L1 product validators

# a corrected copy "in its original format" of calls.vcf.gz is bgzip-compressed; read with a bounded inflate (read_text)
VCF_COMPRESSION = ("gzip", "bgzf")

def _product_vcf(path: Path) -> dict | None:
    try:
        v = read_vcf(path)
    except OSError:
        return None
    return v if any(h.startswith("##fileformat=VCF") for h in v["header"]) else None


def uncarried_trim(rows: list, n_samples: int) -> dict[str, str]:
    """The records whose ALT alleles no delivered sample carries, each key -> its key once those alleles are trimmed
    ("" where no ALT is carried and the record goes): what `bcftools view --trim-alt-alleles -c 1` does to a call
    set subset from a larger one, the standard fix beside recounting its INFO tags (blind study 26)."""
    out = {}
    for r in rows:
        alts = r[4].split(",")
        carried = {a for i in range(n_samples) for a in gt_alleles(r, i) if a not in ("0", ".")}
        keep = [a for j, a in enumerate(alts, start=1) if str(j) in carried]
        if len(keep) < len(alts):
            out[vkey(r, chrom=norm_chrom(r[0]))] = vkey(r, alt=",".join(keep), chrom=norm_chrom(r[0])) if keep else ""
    return out


def _keys_match(v: dict, golden: dict, trimmed: bool = False) -> tuple[bool, str]:
    """The product holds the world's records, once each; with `trimmed`, the records as trimming the ALT alleles no
    sample carries leaves them (`uncarried_trim`) are accepted too."""
    keys = [vkey(r, chrom=norm_chrom(r[0])) for r in v["rows"]]
    want = set(golden["unique_keys"])
    got = set(keys)
    ok = got == want and len(keys) == len(want)
    trim = golden.get("uncarried_trim") or {}
    if trimmed and not ok and trim:
        alt = {trim.get(k, k) for k in want} - {""}
        if got == alt and len(keys) == len(alt):
            return True, f"{len(keys)} records: the world's, with the ALT alleles no sample carries trimmed"
    return ok, f"{len(keys)} records ({len(got & want)} of the {len(want)} expected, {len(keys) - len(got)} repeated)"


@product_validator("clinvar.declared_contigs", compressed=VCF_COMPRESSION)
def declared_contigs(path: Path, golden: dict, check) -> tuple[float, str]:
    """A corrected VCF: every record's contig is declared in its header under one naming, same records."""
    v = _product_vcf(path)
    if v is None:
        return 0.0, "not a VCF"
    contigs = header_ids(v["header"], "contig")
    undeclared = sum(r[0] not in contigs for r in v["rows"])
    names = {r[0] for r in v["rows"]}
    ok, why = _keys_match(v, golden)
    good = ok and undeclared == 0 and len(names) == 1
    return float(good), f"{undeclared} records on undeclared contigs, contig names {sorted(names)}; {why}"


@product_validator("clinvar.true_build_header", compressed=VCF_COMPRESSION)
def true_build_header(path: Path, golden: dict, check) -> tuple[float, str]:
    """A corrected VCF: the same records, every one within its contig's declared length, and each contig the records use
    declared with its GRCh37 length (chromosome 22: 51,304,566; bcftools reheader --fai of the b37 index gives this)."""
    v = _product_vcf(path)
    if v is None:
        return 0.0, "not a VCF"
    lengths, assembly = contig_lengths(v["header"])
    beyond = sum(r[0] not in lengths or int(r[1]) > lengths[r[0]] for r in v["rows"])
    chroms = {r[0] for r in v["rows"]}
    b37 = all(lengths.get(c) == B37_LENGTHS.get(norm_chrom(c)) for c in chroms)     # the length is what tools use
    ok, why = _keys_match(v, golden)
    good = ok and beyond == 0 and b37
    return float(good), (f"{beyond} records outside a declared contig length; contigs {sorted(chroms)} declared "
                         f"{[(c, lengths.get(c), assembly.get(c)) for c in sorted(chroms)]}; {why}")


@product_validator("clinvar.deduplicated", compressed=VCF_COMPRESSION)
def deduplicated(path: Path, golden: dict, check) -> tuple[float, str]:
    """Either a de-duplicated VCF (every distinct record once) or the list of duplicated variant keys."""
    from graders.checks import f1_score, read_items

    v = _product_vcf(path)
    if v is not None:
        ok, why = _keys_match(v, golden)
        return float(ok), f"de-duplicated VCF: {why}"
    want = golden["duplicated_keys"]
    items = [norm_chrom(x.split(":", 1)[0]) + ":" + x.split(":", 1)[1] if ":" in x else x for x in read_items(path, want)]
    p, r, f1 = f1_score(items, want)
    return float(f1 >= 0.95), f"duplicated keys: precision {p:.2f}, recall {r:.2f}, F1 {f1:.2f} (need 0.95)"


@product_validator("clinvar.sorted", compressed=VCF_COMPRESSION)
def sorted_vcf(path: Path, golden: dict, check) -> tuple[float, str]:
    """A coordinate-sorted VCF holding the same records."""
    v = _product_vcf(path)
    if v is None:
        return 0.0, "not a VCF"
    pos = [(norm_chrom(r[0]), int(r[1])) for r in v["rows"]]
    breaks = sum(1 for a, b in zip(pos, pos[1:]) if b < a)
    ok, why = _keys_match(v, golden)
    return float(ok and breaks == 0), f"{breaks} order breaks; {why}"


@product_validator("clinvar.salvaged", compressed=VCF_COMPRESSION)
def salvaged(path: Path, golden: dict, check) -> tuple[float, str]:
    """The intact records of a truncated file as a valid VCF: complete stream (or plain text), the readable records."""
    v = _product_vcf(path)
    if v is None:
        return 0.0, "not a VCF"
    n, want = len(v["rows"]), golden["n_records_read"]
    ok = v["complete"] and abs(n - want) <= 1
    return float(ok), f"{n} records (readable: {want}); stream complete: {v['complete']}"


@product_validator("clinvar.header_complete", compressed=VCF_COMPRESSION)
def header_complete(path: Path, golden: dict, check) -> tuple[float, str]:
    """A VCF whose header defines every INFO and FORMAT tag its records use, same records."""
    v = _product_vcf(path)
    if v is None:
        return 0.0, "not a VCF"
    info_def, fmt_def = header_ids(v["header"], "INFO"), header_ids(v["header"], "FORMAT")
    missing = set()
    for r in v["rows"]:
        missing |= {f"INFO/{t}" for t in info_dict(r[7])} - {f"INFO/{t}" for t in info_def}
        if len(r) > 8:
            missing |= {f"FORMAT/{t}" for t in r[8].split(":")} - {f"FORMAT/{t}" for t in fmt_def}
    restored = {t for t in golden.get("undefined_tags", [])
                if t.split("/")[1] in (info_def if t.startswith("INFO/") else fmt_def)}
    ok, why = _keys_match(v, golden)
    # the data must survive the fix: same samples and genotypes, and a numeric tag typed as a number (a filter on
    # FMT/GQ>=20 must still work), not a header pasted over an emptied file
    same_samples = len(v["samples"]) == golden["n_samples"]
    nonref = sum(1 for r in v["rows"] for i in range(len(v["samples"])) if dosage(r, i) > 0)
    mistyped = [t for t in restored if _numeric_values(v, *t.split("/")) and _declared_type(v["header"], *t.split("/")) == "String"]
    good = (ok and not missing and len(restored) == len(golden.get("undefined_tags", [])) and same_samples
            and nonref == golden["n_nonref_genotypes"] and not mistyped)
    return float(good), (f"undefined tags {sorted(missing)}; {len(restored)} of {len(golden.get('undefined_tags', []))} "
                         f"missing definitions restored; numeric tags typed String: {sorted(mistyped)}; "
                         f"{len(v['samples'])} samples, {nonref} non-reference genotypes (world: {golden['n_samples']}, "
                         f"{golden['n_nonref_genotypes']}); {why}")


def _tag_values(v: dict, kind: str, tag: str) -> list[str]:
    vals = []
    for r in v["rows"]:
        if kind == "INFO":
            x = info_dict(r[7]).get(tag)
            vals += [] if x is None else [x]
        elif len(r) > 8 and tag in r[8].split(":"):
            j = r[8].split(":").index(tag)
            vals += [s.split(":")[j] for s in r[9:] if len(s.split(":")) > j]
    return [x for x in vals if x not in ("", ".")]


def _numeric_values(v: dict, kind: str, tag: str, cast=float) -> bool:
    vals = _tag_values(v, kind, tag)
    try:
        [cast(p) for x in vals for p in x.split(",") if p != "."]
    except ValueError:
        return False
    return bool(vals)


def _declared_type(header: list, kind: str, tag: str) -> str | None:
    import re

    for h in header:
        if h.startswith(f"##{kind}=<ID={tag},"):
            m = re.search(r"Type=(\w+)", h)
            return m.group(1) if m else None
    return None


@product_maker("clinvar.b37_header")
def make_b37_header(src: Path, out: Path) -> None:
    """Test support: the VCF with its ##contig lines replaced by the b37 chromosome 22 line (positions kept)."""
    v = read_vcf(src)
    h = [x for x in v["header"] if not x.startswith("##contig=")]
    h = h[:1] + ["##contig=<ID=22,length=51304566,assembly=b37>"] + h[1:]
    cols = ["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *v["samples"]]
    out.write_text("\n".join(h + ["\t".join(cols)] + ["\t".join(r) for r in v["rows"]]) + "\n")


@product_maker("clinvar.restore_header")
def make_restored_header(src: Path, out: Path) -> None:
    """Test support: the VCF with a definition for every INFO/FORMAT tag its records use, typed from the values."""
    v = read_vcf(src)
    used = set()
    for r in v["rows"]:
        used |= {("INFO", t) for t in info_dict(r[7])}
        used |= {("FORMAT", t) for t in (r[8].split(":") if len(r) > 8 else [])}
    defined = {("INFO", t) for t in header_ids(v["header"], "INFO")} | {("FORMAT", t) for t in header_ids(v["header"], "FORMAT")}
    extra = []
    for kind, tag in sorted(used - defined):
        typ = "Integer" if _numeric_values(v, kind, tag, int) else "Float" if _numeric_values(v, kind, tag) else "String"
        num = "." if any("," in x for x in _tag_values(v, kind, tag)) else "1"
        extra.append(f'##{kind}=<ID={tag},Number={num},Type={typ},Description="restored definition">')
    cols = ["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *v["samples"]]
    out.write_text("\n".join(v["header"] + extra + ["\t".join(cols)] + ["\t".join(r) for r in v["rows"]]) + "\n")


@product_validator("clinvar.recounted", compressed=VCF_COMPRESSION)
def recounted(path: Path, golden: dict, check) -> tuple[float, str]:
    """A VCF whose INFO AC/AN agree with its genotype columns (AF within 0.002), same records and samples."""
    v = _product_vcf(path)
    if v is None:
        return 0.0, "not a VCF"
    bad = 0
    for r in v["rows"]:
        d = info_dict(r[7])
        ac, an = genotype_counts(r, len(v["samples"]))
        afs = [float(x) for x in d.get("AF", "nan").split(",")] if d.get("AF") not in (None, "", ".") else [float("nan")]
        want_af = [c / an if an else 0.0 for c in ac]
        if d.get("AC") != ",".join(map(str, ac)) or d.get("AN") != str(an) or len(afs) != len(want_af) \
                or any(not abs(a - b) <= 0.002 for a, b in zip(afs, want_af)):
            bad += 1
    ok, why = _keys_match(v, golden, trimmed=True)
    same_samples = len(v["samples"]) == golden["n_samples"]
    nonref = sum(1 for r in v["rows"] for i in range(len(v["samples"])) if dosage(r, i) > 0)
    good = ok and bad == 0 and same_samples and nonref == golden["n_nonref_genotypes"]
    return float(good), (f"{bad} records with AC/AN/AF disagreeing with genotypes; {nonref} non-reference genotypes "
                         f"(world: {golden['n_nonref_genotypes']}); {why}")


@product_validator("clinvar.normalized", compressed=VCF_COMPRESSION)
def normalized(path: Path, golden: dict, check) -> tuple[float, str]:
    """Either a VCF in parsimonious form (no record with a padding base all its alleles share) holding the same alleles
    (compared after trimming, multi-allelic records split or not) and genotypes, or the list of the non-parsimonious
    records' variant keys as written."""
    from graders.checks import f1_score, read_items

    v = _product_vcf(path)
    if v is not None:
        left = [vkey(r) for r in v["rows"] if trim_alleles(int(r[1]), r[3], r[4].split(",")) != (int(r[1]), r[3], r[4].split(","))]
        keys = set()
        for r in v["rows"]:
            for a in r[4].split(","):
                p, ref, (alt,) = trim_alleles(int(r[1]), r[3], [a])
                keys.add(f"{norm_chrom(r[0])}:{p}:{ref}:{alt}")
        want = set()
        for k in golden["unique_keys"]:
            c, p0, ref0, alts0 = k.split(":")
            for a in alts0.split(","):
                p, ref, (alt,) = trim_alleles(int(p0), ref0, [a])
                want.add(f"{c}:{p}:{ref}:{alt}")
        same_samples = len(v["samples"]) == golden["n_samples"]
        nonref = sum(1 for r in v["rows"] for i in range(len(v["samples"])) if dosage(r, i) > 0)
        good = not left and keys == want and same_samples and nonref >= golden["n_nonref_genotypes"] * 0.98
        return float(good), (f"normalised VCF: {len(left)} records still padded; {len(keys & want)} of {len(want)} "
                             f"alleles present, {len(keys - want)} unexpected; {nonref} non-reference genotypes "
                             f"(world: {golden['n_nonref_genotypes']})")
    want = golden["unnormalized_keys"]
    items = [norm_chrom(x.split(":", 1)[0]) + ":" + x.split(":", 1)[1] if ":" in x else x for x in read_items(path, want)]
    p, r, f1 = f1_score(items, want)
    return float(f1 >= 0.95), f"non-parsimonious records: precision {p:.2f}, recall {r:.2f}, F1 {f1:.2f} (need 0.95)"


# ---------------------------------------------------------------- L2 frequency_filter

def kg_prefix(header: list) -> str:
    """'' when the 1000 Genomes frequencies are the plain AF/AFR_AF/... tags, 'KG_' when they were moved."""
    for h in header:
        if h.startswith("##INFO=<ID=KG_AF,") and "1000 Genomes" in h:
            return "KG_"
    return ""


def filtering_af(info: dict, prefix: str) -> float:
    return max(float(info.get(prefix + t) or 0) for t in POP_TAGS)


def frequency_analysis(vcf: dict, meta: dict) -> dict:
    task = meta["task"]
    T = float(task["max_allele_frequency"])
    pi = vcf["samples"].index(task["proband"])
    pre = kg_prefix(vcf["header"])
    carried, rare, trap, passes, faf = [], [], [], {}, {}
    for r in vcf["rows"]:
        if dosage(r, pi) <= 0:
            continue
        d = info_dict(r[7])
        k = vkey(r)
        f = filtering_af(d, pre)
        carried.append(k)
        faf[k] = round(f, 4)
        passes[k] = int(f < T)
        if f < T:
            rare.append(k)
        if float(d.get("AF", "1").split(",")[0] or 1) < T:
            trap.append(k)
    return {"proband": task["proband"], "threshold": T, "af_tags": pre or "plain", "n_carried": len(carried),
            "rare_keys": rare, "n_rare": len(rare), "passes": passes, "filter_af": faf,
            "trap_keys": trap if set(trap) != set(rare) else [], "naive_keys": trap,
            "trap_admitted": sorted(set(trap) - set(rare)), "trap_missed": sorted(set(rare) - set(trap)),
            "n_naive": len(trap), "n_trap_admitted": len(set(trap) - set(rare))}


MARGIN = 1.5          # every frequency a golden compares with a cut-off sits >= 1.5x away from it (issue 18)


class ThresholdMargin(ValueError):
    """A world whose golden decides at a cut-off: some reading of the file could flip a decision."""


def _readings(text: str, cut: float) -> dict:
    """The decision 'text < cut' as the decimal text reads it, as float32 read and compared in float32 (pysam, numpy),
    and as bcftools compares it (the float32 value widened to double against the double cut-off)."""
    from decimal import Decimal

    f32 = np.float32(text)
    return {"text": Decimal(text) < Decimal(repr(cut)), "float32": bool(f32 < np.float32(cut)),
            "bcftools": float(f32) < cut}


def check_margins(world_id: str, items: list, cut: float, fix: str) -> None:
    """items: (variant, what, value text) whose comparison with `cut` makes a golden decision. Refuses the world when a
    value lies within the MARGIN of the cut-off or when the text, float32 and bcftools readings disagree."""
    for k, what, text in items:
        x = float(text)
        reads = _readings(text, cut)
        if cut / MARGIN < x < cut * MARGIN or len(set(reads.values())) > 1:
            raise ThresholdMargin(
                f"{world_id}: variant {k} has {what} = {text}, within {MARGIN}x of the cut-off {cut} (readings: "
                f"{reads}); a reading tool or a rounding could flip its decision. Fix: {fix}")


def _filter_texts(info: dict, prefix: str) -> tuple[str, str]:
    """(popmax text, global AF text): the 1000 Genomes tags' texts, the largest value and the global one."""
    vals = [(float(info.get(prefix + t) or 0), info.get(prefix + t) or "0") for t in POP_TAGS]
    return max(vals)[1], info.get(prefix + "AF") or "0"


@solver("clinvar.L2.frequency_filter", version="2")
def l2_frequency(world_dir: Path, world) -> dict:
    from worlds.clinvar.build import filtering_faf

    world_dir = Path(world_dir)
    vcf, meta = read_vcf(world_dir / VCF), json.loads((world_dir / "meta.json").read_text())
    res = frequency_analysis(vcf, meta)
    pi, pre, T = vcf["samples"].index(meta["task"]["proband"]), kg_prefix(vcf["header"]), res["threshold"]
    items = []
    fix = ("redraw the world: clinvar.frequency_world picks only variants whose popmax and global AF are at least 1.5x "
           "from the cut-off and whose filtering AF (faf95) agrees")
    for r in vcf["rows"]:
        if dosage(r, pi) <= 0:
            continue
        d = info_dict(r[7])
        pm, glob = _filter_texts(d, pre)
        items += [(vkey(r), "popmax AF", pm), (vkey(r), f"{pre}AF (global)", glob)]
        if (filtering_faf(d, pre) < T) != (float(pm) < T):
            raise ThresholdMargin(f"{getattr(world, 'id', world)}: variant {vkey(r)}: the filtering AF (faf95 "
                                  f"{filtering_faf(d, pre):.4f}) and popmax ({pm}) decide differently. Fix: {fix}")
    check_margins(getattr(world, "id", world), items, T, fix)
    return res


# ---------------------------------------------------------------- L2 carrier_screen

def split_alleles(vcf: dict) -> dict:
    """(normalised chrom, pos, ref, alt) -> (row, allele index) for every ALT of every record (split multi-allelics)."""
    out = {}
    for r in vcf["rows"]:
        for k, a in enumerate(r[4].split(","), start=1):
            out[(norm_chrom(r[0]), int(r[1]), r[3], a)] = (r, k)
    return out


def carrier_analysis(vcf: dict, table: pd.DataFrame) -> dict:
    alleles = split_alleles(vcf)
    plp = table[table["clinical_significance"].isin(PLP)]
    n_car, trap, pairs, lowq = {}, {}, [], {}
    by_key = {vkey(r): r for r in vcf["rows"]}
    for e in plp.itertuples():
        tk = f"{e.chrom}:{e.pos}:{e.ref}:{e.alt}"
        hit = alleles.get((norm_chrom(str(e.chrom)), int(e.pos), e.ref, e.alt))
        n = low = 0
        if hit is not None:
            r, k = hit
            for i, s in enumerate(vcf["samples"]):
                f = sample_fields(r, i)
                al = f.get("GT", "./.").replace("|", "/").split("/")
                if str(k) not in al:
                    continue
                try:
                    conf = int(f.get("GQ", "0")) >= MIN_GQ and int(f.get("DP", "0")) >= MIN_DP
                except ValueError:
                    conf = False
                if conf:
                    n += 1
                    pairs.append(f"{s}@{tk}")
                else:
                    low += 1
        n_car[tk] = n
        lowq[tk] = low
        # the trap: the record as written, matched on its own text, any non-reference genotype counted
        r = by_key.get(tk)
        trap[tk] = sum(1 for i in range(len(vcf["samples"])) if r is not None and dosage(r, i) > 0)
    carried = sorted(k for k, n in n_car.items() if n > 0)
    differs = sum(trap[k] != n_car[k] for k in n_car)
    return {"n_carriers": n_car, "carried_plp": carried, "n_carried_plp": len(carried),
            "n_carrier_genotypes": int(sum(n_car.values())), "carrier_pairs": sorted(pairs),
            "low_confidence_calls": {k: v for k, v in lowq.items() if v}, "n_plp_entries": len(n_car),
            "trap_n_carriers": trap if differs >= 0.3 * len(n_car) else {},
            "naive_n_carriers": trap, "n_naive_carrier_genotypes": int(sum(trap.values())), "naive_carried_plp": sorted(k for k, n in trap.items() if n > 0),
            "n_multiallelic_records": sum("," in r[4] for r in vcf["rows"]),
            "table_contigs": sorted({str(c) for c in table["chrom"]}), "vcf_contigs": sorted({r[0] for r in vcf["rows"]})}


def read_table(world_dir: Path) -> pd.DataFrame:
    return pd.read_csv(Path(world_dir) / "clinvar_like.tsv", sep="\t", dtype={"chrom": str})


@solver("clinvar.L2.carrier_screen", version="2")
def l2_carrier(world_dir: Path, world) -> dict:
    from worlds.clinvar.build import call_quality

    vcf, table = read_vcf(Path(world_dir) / VCF), read_table(world_dir)
    alleles = split_alleles(vcf)
    for e in table[table["clinical_significance"].isin(PLP)].itertuples():
        hit = alleles.get((norm_chrom(str(e.chrom)), int(e.pos), e.ref, e.alt))
        if hit is None:
            continue
        r, k = hit
        for i, smp in enumerate(vcf["samples"]):
            f = sample_fields(r, i)
            if str(k) in f.get("GT", "./.").replace("|", "/").split("/") and call_quality(f) == "ambiguous":
                raise ThresholdMargin(
                    f"{getattr(world, 'id', world)}: carrier call {smp} at {e.chrom}:{e.pos}:{e.ref}:{e.alt} has GQ "
                    f"{f.get('GQ')} DP {f.get('DP')}, neither clearly confident (GQ >= 30 and DP >= 10) nor clearly low "
                    f"(GQ < 10 and DP < 6): genotype filters an expert could use would disagree. Fix: redraw the world "
                    f"(clinvar.carrier_world draws P/LP entries only where every carrier call is clear)")
    return carrier_analysis(vcf, table)


# ---------------------------------------------------------------- L2 reportable_findings

def findings_analysis(vcf: dict, table: pd.DataFrame, meta: dict) -> dict:
    pi = vcf["samples"].index(meta["task"]["proband"])
    alleles = split_alleles(vcf)
    pre = kg_prefix(vcf["header"])
    by_pos = {}
    for r in vcf["rows"]:
        by_pos.setdefault((norm_chrom(r[0]), int(r[1])), []).append(r)
    findings, naive, dos, faf, sig = [], [], {}, {}, {}
    for e in table.itertuples():
        tk = f"{e.chrom}:{e.pos}:{e.ref}:{e.alt}"
        sig[tk] = e.clinical_significance
        hit = alleles.get((norm_chrom(str(e.chrom)), int(e.pos), e.ref, e.alt))
        g = 0
        if hit is not None:
            r, k = hit
            al = gt_alleles(r, pi)
            g = sum(a == str(k) for a in al)
            faf[tk] = round(filtering_af(info_dict(r[7]), pre), 4)
        dos[tk] = g
        if g > 0 and e.clinical_significance in PLP and faf[tk] < BA1_AF:
            findings.append(tk)
        # the trap: join on position, substring 'pathogenic', no frequency check
        pos_hit = any(dosage(r, pi) > 0 for r in by_pos.get((norm_chrom(str(e.chrom)), int(e.pos)), []))
        if pos_hit and "pathogenic" in str(e.clinical_significance).lower():
            naive.append(tk)
    return {"proband": meta["task"]["proband"], "findings": sorted(findings), "n_findings": len(findings),
            "proband_dosage": dos, "filter_af": faf, "trap_findings": sorted(naive) if set(naive) != set(findings) else [],
            "naive_findings": sorted(naive), "n_naive_findings": len(naive),
            "conflicting_carried": sorted(k for k, g in dos.items() if g > 0 and sig.get(k) == CONFLICTING),
            "common_plp_carried": sorted(k for k in faf if dos.get(k, 0) > 0 and faf[k] >= BA1_AF and sig.get(k) in PLP)}


@solver("clinvar.L2.reportable_findings", version="2")
def l2_findings(world_dir: Path, world) -> dict:
    world_dir = Path(world_dir)
    vcf, table, meta = read_vcf(world_dir / VCF), read_table(world_dir), json.loads((world_dir / "meta.json").read_text())
    res = findings_analysis(vcf, table, meta)
    pre, alleles = kg_prefix(vcf["header"]), split_alleles(vcf)
    items = []
    for k, g in res["proband_dosage"].items():       # carried P/LP entries: BA1 decides whether they are reported
        c, p, ref, alt = k.split(":")
        hit = alleles.get((norm_chrom(c), int(p), ref, alt))
        e = table[(table["pos"] == int(p)) & (table["ref"] == ref) & (table["alt"] == alt)]
        if g <= 0 or hit is None or not e["clinical_significance"].isin(PLP).any():
            continue
        pm, glob = _filter_texts(info_dict(hit[0][7]), pre)
        # common (BA1) must hold on the global AF (2,184 alleles, the ClinGen >= 2,000 rule); rare on popmax
        items.append((k, "global AF" if float(pm) >= BA1_AF else "popmax AF", glob if float(pm) >= BA1_AF else pm))
    check_margins(getattr(world, "id", world), items, BA1_AF,
                  "redraw the world: clinvar.findings_world puts P/LP entries only on variants with popmax AF <= "
                  "0.033 or global AF >= 0.075")
    return res


# ---------------------------------------------------------------- L2 inheritance (trio)

def _reliable(f: dict) -> bool:
    try:
        return int(f.get("GQ", "0")) >= MIN_GQ and int(f.get("DP", "0")) >= MIN_DP
    except ValueError:
        return False


def inheritance_analysis(vcf: dict, table: pd.DataFrame, meta: dict) -> dict:
    """Per candidate gene: how many of the proband's two gene copies carry a candidate variant (2: homozygous, or two
    hets inherited one from each parent; 1: one het, or hets all from one parent, or a de novo), and whether that fits
    the gene's mode (AR: 2 copies; AD with unaffected parents: a confident de novo variant: proband het, both parents
    hom-ref on reliable calls, GQ >= 20 and DP >= 10, no ALT reads). Also the naive reading (every gene where the
    proband carries a candidate; de novo from GT alone)."""
    fam = meta["family"]
    S = vcf["samples"]
    ci, pi = S.index(fam["proband"]), [S.index(p) for p in fam["parents"]]
    alleles = split_alleles(vcf)
    hits, explained, naive, origin, de_novo, naive_dn = {}, [], [], {}, [], []
    single_ar, cis_ar, trans_ar, dropout = [], [], [], []
    for gene, grp in table.groupby("gene", sort=True):
        mode = str(grp["inheritance_mode"].iloc[0])
        srcs, hom, carried, dn = set(), False, False, False
        n_het = 0
        for e in grp.itertuples():
            k = f"{e.chrom}:{e.pos}:{e.ref}:{e.alt}"
            hit = alleles.get((norm_chrom(str(e.chrom)), int(e.pos), e.ref, e.alt))
            if hit is None:
                origin[k] = "absent"
                continue
            r, a = hit
            cg = gt_alleles(r, ci)
            c = sum(x == str(a) for x in cg)
            if c == 0:
                origin[k] = "not carried"
                continue
            carried = True
            if c == 2:
                hom = True
                origin[k] = "homozygous"
                continue
            n_het += 1
            par = []
            for j in pi:
                f = sample_fields(r, j)
                d = sum(x == str(a) for x in gt_alleles(r, j))
                ad = f.get("AD", "0,0").split(",")
                alt_reads = int(ad[a]) if len(ad) > a and ad[a].isdigit() else 0
                par.append((d, _reliable(f), alt_reads))
            if all(d == 0 for d, _, _ in par):
                naive_dn.append(k)
            if all(d == 0 and ok and ar == 0 for d, ok, ar in par):
                origin[k] = "de novo"
                srcs.add("de novo")
                de_novo.append(k)
                dn = True
            elif all(d == 0 for d, _, _ in par):
                origin[k] = "uncertain (parental hom-ref call unreliable)"
                dropout.append(k)
                srcs.add("unknown")
            elif par[0][0] >= 1 and par[1][0] == 0 and par[1][1]:
                origin[k] = "parent 1"
                srcs.add("p1")
            elif par[1][0] >= 1 and par[0][0] == 0 and par[0][1]:
                origin[k] = "parent 2"
                srcs.add("p2")
            else:
                origin[k] = "unphased"
                srcs.add("unknown")
        n = 2 if hom or {"p1", "p2"} <= srcs else (1 if carried else 0)
        hits[gene] = n
        if carried:
            naive.append(gene)
        if (mode == "AR" and n == 2) or (mode == "AD" and dn):
            explained.append(gene)
        if mode == "AR" and carried and n_het == 1 and not hom:
            single_ar.append(gene)
        if mode == "AR" and n_het >= 2 and n < 2:
            cis_ar.append(gene)
        if mode == "AR" and n_het >= 2 and not hom and {"p1", "p2"} <= srcs:
            trans_ar.append(gene)  # two hets, one from each parent: a compound heterozygote the trio phases
    return {"proband": fam["proband"], "explained_genes": sorted(explained), "n_explained": len(explained),
            "haplotypes_hit": hits, "variant_origin": origin, "de_novo": sorted(de_novo), "n_de_novo": len(de_novo),
            "naive_explained": sorted(naive), "trap_explained": sorted(naive) if set(naive) != set(explained) else [],
            "naive_de_novo": sorted(naive_dn), "n_naive_de_novo": len(naive_dn),
            "single_het_ar_genes": sorted(single_ar), "cis_ar_genes": sorted(cis_ar), "trans_ar_genes": sorted(trans_ar), "dropout_variants": sorted(dropout),
            "n_candidate_genes": len(hits)}


@solver("clinvar.L2.inheritance", version="2")
def l2_inheritance(world_dir: Path, world) -> dict:
    from worlds.clinvar.build import call_quality

    world_dir = Path(world_dir)
    vcf, meta = read_vcf(world_dir / VCF), json.loads((world_dir / "meta.json").read_text())
    table = pd.read_csv(world_dir / "candidates.tsv", sep="\t", dtype={"chrom": str})
    alleles = split_alleles(vcf)
    for e in table.itertuples():
        hit = alleles.get((norm_chrom(str(e.chrom)), int(e.pos), e.ref, e.alt))
        if hit is None:
            continue
        for i, smp in enumerate(vcf["samples"]):
            if call_quality(sample_fields(hit[0], i)) == "ambiguous":
                raise ThresholdMargin(
                    f"{getattr(world, 'id', world)}: call {smp} at {e.chrom}:{e.pos} has GQ/DP between clearly "
                    f"confident and clearly low: genotype filters an expert could use would disagree. Fix: redraw "
                    f"(clinvar.inheritance_world uses only clear calls)")
    return inheritance_analysis(vcf, table, meta)


# ---------------------------------------------------------------- L3 dossier

@solver("clinvar.L3.dossier", version="1")
def l3_dossier(world_dir: Path, world) -> dict:
    if (Path(world_dir) / "mendel_summary.csv").exists():
        return l3_mendel(world_dir)
    per = pd.read_csv(Path(world_dir) / "sample_summary.csv")
    spec = pd.read_csv(Path(world_dir) / "substitution_spectrum.csv")
    ca = spec[spec["substitution"] == "C>A"].set_index("sample")
    return {"ti_tv": dict(zip(per["sample"], per["ti_tv"])),
            "singleton_ti_tv": dict(zip(per["sample"], per["singleton_ti_tv"])),
            "c_to_a_fraction": {s: float(ca.loc[s, "fraction_of_snvs"]) for s in ca.index},
            "c_to_a_singletons": {s: int(ca.loc[s, "singletons"]) for s in ca.index},
            "lowest_ti_tv_sample": str(per.sort_values(["ti_tv", "sample"])["sample"].iloc[0]),
            "median_ti_tv": float(per["ti_tv"].median())}


def l3_mendel(world_dir: Path) -> dict:
    summ = pd.read_csv(Path(world_dir) / "mendel_summary.csv")
    by = pd.read_csv(Path(world_dir) / "mendel_by_call_class.csv")
    tot = by.groupby("call_class")[["informative_sites", "inconsistent_sites"]].sum()
    return {"inconsistent_percent": dict(zip(summ["child"], summ["inconsistent_percent"].astype(float))),
            "inconsistent_sites": dict(zip(summ["child"], summ["inconsistent_sites"].astype(int))),
            "total_inconsistent": int(summ["inconsistent_sites"].sum()),
            "total_informative": int(summ["informative_sites"].sum()),
            "class_percent": {c: round(100 * float(r.inconsistent_sites) / max(float(r.informative_sites), 1), 2)
                              for c, r in tot.iterrows()},
            "class_inconsistent": {c: int(r.inconsistent_sites) for c, r in tot.iterrows()}}


from worlds.clinvar import scripted  # noqa: E402,F401  (registers the oracle and naive solutions)
