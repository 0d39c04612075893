"""The clinvar track's grounding host: items (worlds/clinvar/grounding.yaml) on the track's real germline VCFs.

Substrate: the two real VCFs of Debian r-bioc-variantannotation 1.44.1-1 (`package_file("variantannotation", ...)`,
the same files worlds/clinvar/build.py reads), chosen per item by a grounding.yaml dataset (`Dataset`):
  exome   hapmap_exome_chr22.vcf.gz: GATK 3.3 HaplotypeCaller/VQSR joint calls of 22 HapMap/CEPH samples (CEU, YRI,
          CHB, JPT; several parent-offspring trios), chromosome 22, GRCh37, 1,011 records; real Coriell sample IDs
          (the '@' lab-barcode suffix dropped) or, with `rename`, opaque IDs for every sample (the Coriell IDs encode
          the HapMap panel, hence ancestry). INFO AC/AN/AF are recomputed from the genotype columns in every version
          (bcftools +fill-tags semantics), so an edited version is not told apart by their formatting.
  g1k     chr22.vcf.gz: 1000 Genomes Phase 1 genotypes of five GBR samples (HG00096-HG00101), chr22:50.30-51.00 Mb,
          10,376 records with the real Phase 1 AF/AFR_AF/AMR_AF/ASN_AF/EUR_AF of 1,092 people (left as they are).
Header lines that only record provenance (##GATKCommandLine, ##GVCFBlock) are dropped, as build.py does.

Versions, each written through the canonical writer (calls.vcf, an uncompressed VCF, + meta.json):
  null        sample columns permuted and record IDs (dbSNP rs numbers) removed ('.'); sample names are kept, as the
              options name samples
  withdrawal  drop_sample (one sample's genotype column removed: its name is then in no file) | mask_sample (every
              genotype of one sample a no-call './.', as a sample that failed in joint calling) | remove_info_tag (an
              INFO field removed from every record and from the header)
  flip        exchange_samples (two samples' genotype columns exchanged: a sample swap) | duplicate_sample (one
              sample's column replaced by a copy of another's: one library under two names) | swap_info_tags (the
              values of two INFO fields exchanged in every record: an annotation column mislabelled)

Statistic kinds (`STAT_SOURCE`), all over the records whose FILTER is PASS (or '.'), genotypes from GT:
  trio_child      options samples; for each option c, the Mendelian-inconsistency rate of c as the child of the best
                  pair of the other options (sites where all three are called and not all three 0/0); lowest wins
  kinship         options sample pairs ("X and Y"); KING-robust kinship (Manichaikul et al. 2010) over biallelic
                  sites called in both; highest wins
  ancestry_outlier  options samples; the genetic relationship (GRM: standardised genotypes with allele frequencies
                  of all samples in the file) of each option with the other options, averaged; lowest wins
  heterozygosity  options samples; heterozygous genotypes / called genotypes; highest wins
  private         options samples; records at which the sample carries a non-reference allele and no other sample
                  of the file does; highest wins
  af_match        options populations (`tags`: letter -> INFO tag); mean |cohort alternate-allele frequency from the
                  genotypes - the tag's value| over biallelic records (a tag absent from a record reads 0); lowest wins
Undefined when an option's sample is not in the file or has genotype calls at fewer than `min_call_rate` (default
0.5) of the sites, when an INFO tag has no header definition, or within the item's margin (graders.grounding.decide).

No anonymisation hooks: sample identifiers that would reveal the answer are opaque in every version instead.
"""
from __future__ import annotations

import functools
import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

from benchmark.suite.canonical import CanonicalWriter
from benchmark.errors import BenchmarkError
from benchmark.grounding.host import GroundingHost
from benchmark.suite.package_data import package_file
from benchmark.suite.registry import grounding_host
from graders.grounding import file_texts, files_mentioning
from worlds.clinvar.build import recount

VCF = "calls.vcf"
SOURCES = {"exome": "hapmap_exome_chr22.vcf.gz", "g1k": "chr22.vcf.gz"}
DROP_HEADER = ("##GATKCommandLine", "##GVCFBlock", "##bcftools")
CORIELL = re.compile(r"NA\d{5}")


class Dataset(BaseModel):
    """One of the two real VCFs, with every sample renamed to an opaque ID when `rename` is given (it must then
    cover every sample)."""

    model_config = ConfigDict(extra="forbid")
    source: Literal["exome", "g1k"]
    rename: dict[str, str] = {}
    description: str

    @model_validator(mode="after")
    def _check(self) -> "Dataset":
        if len(set(self.rename.values())) != len(self.rename):
            raise ValueError("rename maps two samples to the same ID")
        return self


@dataclass
class VData:
    header: list[str]              # '##' lines
    samples: list[str]
    rows: list[list[str]]          # CHROM POS ID REF ALT QUAL FILTER INFO FORMAT sample...
    source: str
    opaque: bool = False
    meta: dict = field(default_factory=dict)

    def copy(self) -> "VData":
        return VData(list(self.header), list(self.samples), [list(r) for r in self.rows], self.source, self.opaque,
                     dict(self.meta))


@functools.lru_cache(maxsize=2)
def _parsed(source: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, ...], ...]]:
    header, rows, cols = [], [], []
    with gzip.open(package_file("variantannotation", SOURCES[source]), "rt") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line.startswith("##"):
                if not line.startswith(DROP_HEADER):
                    header.append(line)
            elif line.startswith("#"):
                cols = line[1:].split("\t")
            elif line:
                rows.append(tuple(line.split("\t")))
    samples = tuple(s.split("@")[0] for s in cols[9:])  # Coriell IDs (the exome's '@' suffix is a lab barcode)
    if len(set(samples)) != len(samples) or not rows:
        raise BenchmarkError(f"{SOURCES[source]}: unexpected layout (no records or repeated sample names); re-fetch it "
                             "with `python -m benchmark data fetch`")
    return tuple(header), samples, tuple(rows)


# ---------------------------------------------------------------- helpers

def _info(s: str) -> list[tuple[str, str | None]]:
    out = []
    for kv in s.split(";"):
        if kv and kv != ".":
            k, eq, v = kv.partition("=")
            out.append((k, v if eq else None))
    return out


def _info_str(items: list[tuple[str, str | None]]) -> str:
    return ";".join(k if v is None else f"{k}={v}" for k, v in items) or "."


def _recount(d: VData) -> None:
    """INFO AC (per ALT), AN and AF from the genotype columns, in place (the build's recount, every record)."""
    for row in d.rows:
        recount(row, len(d.samples))


def _col(d: VData, name: str) -> int:
    if name not in d.samples:
        raise BenchmarkError(f"sample {name} is not a column of the VCF")
    return d.samples.index(name)


def _edited(d: VData) -> VData:
    if d.source == "exome":
        _recount(d)
    return d


# ---------------------------------------------------------------- operations

def op_null(d: VData, rng: np.random.Generator) -> VData:
    out = d.copy()
    order = rng.permutation(len(d.samples))
    out.samples = [d.samples[i] for i in order]
    out.rows = [r[:2] + ["."] + r[3:9] + [r[9 + i] for i in order] for r in d.rows]
    return out


def op_drop_sample(d: VData, rng, sample: str) -> VData:
    j = _col(d, sample)
    out = d.copy()
    out.samples.pop(j)
    for r in out.rows:
        r.pop(9 + j)
    return _edited(out)


def op_mask_sample(d: VData, rng, sample: str) -> VData:
    j = _col(d, sample)
    out = d.copy()
    for r in out.rows:
        r[9 + j] = "./."
    return _edited(out)


def op_exchange_samples(d: VData, rng, a: str, b: str) -> VData:
    i, j = _col(d, a), _col(d, b)
    out = d.copy()
    for r in out.rows:
        r[9 + i], r[9 + j] = r[9 + j], r[9 + i]
    return _edited(out)


def op_duplicate_sample(d: VData, rng, source: str, target: str) -> VData:
    i, j = _col(d, source), _col(d, target)
    out = d.copy()
    for r in out.rows:
        r[9 + j] = r[9 + i]
    return _edited(out)


def _header_def(d: VData, tag: str) -> int:
    for k, h in enumerate(d.header):
        if h.startswith(f"##INFO=<ID={tag},"):
            return k
    raise BenchmarkError(f"INFO tag {tag} has no header definition")


def op_remove_info_tag(d: VData, rng, tag: str) -> VData:
    k = _header_def(d, tag)
    out = d.copy()
    out.header.pop(k)
    for r in out.rows:
        r[7] = _info_str([(key, v) for key, v in _info(r[7]) if key != tag])
    return out


def op_swap_info_tags(d: VData, rng, a: str, b: str) -> VData:
    """The values of INFO tags a and b exchanged in every record (a record with only one of them gets it under the
    other name, in the first one's place); the header definitions stay as they are."""
    _header_def(d, a), _header_def(d, b)
    out = d.copy()
    for r in out.rows:
        items = _info(r[7])
        r[7] = _info_str([({a: b, b: a}.get(k, k), v) for k, v in items])
    return out


OPS = {"drop_sample": op_drop_sample, "mask_sample": op_mask_sample, "remove_info_tag": op_remove_info_tag,
       "exchange_samples": op_exchange_samples, "duplicate_sample": op_duplicate_sample,
       "swap_info_tags": op_swap_info_tags}

# ---------------------------------------------------------------- statistics (run on the host and in the sandbox)

STAT_SOURCE = r'''
import itertools, os
import numpy as np

VCF = "calls.vcf"


def load(root="."):
    """calls.vcf read back: {"header": '##' lines, "samples": names, "records": one dict per record with chrom,
    pos, id, ref, alts, filter, info (tag -> value, '' for a flag) and gts (per sample a tuple of allele indices, or
    None for a no-call)}."""
    header, samples, records = [], None, []
    with open(os.path.join(root, VCF), encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line.startswith("##"):
                header.append(line)
                continue
            if line.startswith("#"):
                samples = line.split("\t")[9:]
                continue
            if not line:
                continue
            f = line.split("\t")
            fmt = f[8].split(":") if len(f) > 8 else []
            gi = fmt.index("GT") if "GT" in fmt else None
            gts = []
            for s in f[9:]:
                parts = s.split(":")
                g = parts[gi] if gi is not None and gi < len(parts) else "."
                alleles = g.replace("|", "/").split("/")
                gts.append(None if "." in alleles else tuple(int(a) for a in alleles))
            info = {}
            for kv in f[7].split(";"):
                if kv and kv != ".":
                    k, _, v = kv.partition("=")
                    info[k] = v
            records.append({"chrom": f[0], "pos": int(f[1]), "id": f[2], "ref": f[3], "alts": f[4].split(","),
                            "filter": f[6], "info": info, "gts": gts})
    if samples is None:
        raise ValueError(f"{VCF}: no #CHROM header line")
    for r in records:
        if len(r["gts"]) != len(samples):
            raise ValueError(f"{VCF}: record {r['chrom']}:{r['pos']} has {len(r['gts'])} genotype columns for "
                             f"{len(samples)} samples")
    return {"header": header, "samples": samples, "records": records}


def passing(data):
    return [r for r in data["records"] if r["filter"] in ("PASS", ".")]


def dosage(records):
    """Alternate-allele counts (float, NaN for a no-call) of biallelic diploid calls: records x samples."""
    rows = []
    for r in records:
        if len(r["alts"]) != 1:
            continue
        rows.append([np.nan if g is None or len(g) != 2 else float((g[0] > 0) + (g[1] > 0)) for g in r["gts"]])
    return np.array(rows, dtype=np.float64).reshape(len(rows), -1)


def check_samples(data, names, recs, spec, missing):
    """Column index of every named sample; `missing` names those absent or with too few genotype calls."""
    pos = {s: i for i, s in enumerate(data["samples"])}
    min_rate = float(spec.get("min_call_rate", 0.5))
    out, seen = {}, set()
    for s in names:
        if s in seen:
            continue
        seen.add(s)
        if s not in pos:
            missing.append(f"sample {s} is not in {VCF}")
            continue
        rate = sum(r["gts"][pos[s]] is not None for r in recs) / max(len(recs), 1)
        if rate < min_rate:
            missing.append(f"sample {s} has genotype calls at only {rate:.0%} of the sites")
            continue
        out[s] = pos[s]
    return out


def mendel_rate(recs, c, p1, p2):
    """Share of informative sites (all three called, diploid, not all 0/0) where child c's genotype cannot be formed
    from one allele of p1 and one of p2."""
    bad = n = 0
    for r in recs:
        gc, ga, gb = r["gts"][c], r["gts"][p1], r["gts"][p2]
        if gc is None or ga is None or gb is None or len(gc) != 2 or len(ga) != 2 or len(gb) != 2:
            continue
        if max(gc + ga + gb) == 0:
            continue
        n += 1
        x, y = gc
        if not ((x in ga and y in gb) or (y in ga and x in gb)):
            bad += 1
    return bad / n if n else None


def king_robust(x, y):
    """KING-robust kinship of two dosage vectors (NaN: no-call) over the sites called in both."""
    ok = ~np.isnan(x) & ~np.isnan(y)
    a, b = x[ok], y[ok]
    hh = float(((a == 1) & (b == 1)).sum())
    opp = float((((a == 0) & (b == 2)) | ((a == 2) & (b == 0))).sum())
    ni, nj = float((a == 1).sum()), float((b == 1).sum())
    m = min(ni, nj)
    if m == 0:
        return None
    return (hh - 2 * opp) / (2 * m) + 0.5 - (ni + nj) / (4 * m)


def grm(g):
    """Genetic relationship matrix of standardised genotypes (allele frequencies of every sample in the file; sites
    polymorphic among the called genotypes); a no-call contributes 0."""
    p = np.nanmean(g, axis=1) / 2
    keep = (p > 0) & (p < 1)
    g, p = g[keep], p[keep]
    z = (g - 2 * p[:, None]) / np.sqrt(2 * p * (1 - p))[:, None]
    called = (~np.isnan(z)).astype(np.float64)
    z = np.nan_to_num(z)
    return (z.T @ z) / np.maximum(called.T @ called, 1)


def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    kind, margin = spec["kind"], float(spec["margin"])
    direction = spec.get("direction", "max")
    recs = passing(data)
    values, missing = {}, []
    if kind in ("trio_child", "ancestry_outlier", "heterozygosity", "private"):
        col = check_samples(data, list(options.values()), recs, spec, missing)
        for letter in options:
            values[letter] = None
        if missing:
            return decide(values, missing, margin, direction)
    if kind == "trio_child":
        for letter, c in options.items():
            others = [s for s in options.values() if s != c]
            rates = [mendel_rate(recs, col[c], col[a], col[b]) for a, b in itertools.combinations(others, 2)]
            rates = [x for x in rates if x is not None]
            values[letter] = min(rates) if rates else None
            if not rates:
                missing.append(f"no informative sites for {c} as a child")
    elif kind == "kinship":
        pairs = {letter: [s.strip() for s in text.split(" and ")] for letter, text in options.items()}
        col = check_samples(data, [s for p in pairs.values() for s in p], recs, spec, missing)
        g = dosage(recs)
        for letter, (a, b) in pairs.items():
            values[letter] = king_robust(g[:, col[a]], g[:, col[b]]) if a in col and b in col else None
    elif kind == "ancestry_outlier":
        a = grm(dosage(recs))
        for letter, s in options.items():
            values[letter] = float(np.mean([a[col[s], col[t]] for t in options.values() if t != s]))
    elif kind == "heterozygosity":
        for letter, s in options.items():
            called = [r["gts"][col[s]] for r in recs if r["gts"][col[s]] is not None]
            values[letter] = sum(len(set(g)) > 1 for g in called) / len(called)
    elif kind == "private":
        for letter, s in options.items():
            n = 0
            for r in recs:
                carriers = [i for i, g in enumerate(r["gts"]) if g is not None and max(g) > 0]
                n += carriers == [col[s]]
            values[letter] = float(n)
    elif kind == "af_match":
        tags = spec["tags"]
        defined = {h.split("ID=", 1)[1].split(",", 1)[0] for h in data["header"] if h.startswith("##INFO=<ID=")}
        for letter in options:
            if tags[letter] not in defined:
                missing.append(f"INFO tag {tags[letter]} has no header definition in {VCF}")
        bi = [r for r in recs if len(r["alts"]) == 1]
        g = dosage(bi)
        n_called = (~np.isnan(g)).sum(1)
        ok = n_called > 0
        cohort = np.nansum(g, 1)[ok] / (2 * n_called[ok])
        for letter in options:
            tag = tags[letter]
            if tag not in defined:
                values[letter] = None
                continue
            ref = np.array([float(r["info"].get(tag) or 0) for r, k in zip(bi, ok) if k])
            values[letter] = float(np.abs(cohort - ref).mean())
    else:
        raise ValueError(f"unknown statistic kind {kind!r}")
    return decide(values, missing, margin, direction)
'''

META = {
    "exome": {
        "assay": ("germline short-variant calls (VCF 4.1) from whole-exome sequencing: GATK HaplotypeCaller joint "
                  "calling with VQSR filtering, human chromosome 22, GRCh37 (b37 contig names)"),
        "samples": "22 HapMap / CEPH reference samples",
    },
    "g1k": {
        "assay": ("germline variant genotypes (VCF 4.1) of the 1000 Genomes Project Phase 1 (low-coverage whole-genome "
                  "and exome sequencing, imputed and phased), human chromosome 22, GRCh37"),
        "samples": "5 samples of one 1000 Genomes population",
    },
}


# ---------------------------------------------------------------- the host

@grounding_host("clinvar")
class ClinvarHost(GroundingHost):
    """Germline call sets of chromosome 22 (the track's VCFs), one per grounding.yaml dataset, whose samples an item
    may rename."""

    families = ("trio", "relatedness", "ancestry", "diversity")
    assay = "germline variant calls (VCF)"
    files = ("calls.vcf (an uncompressed VCF of germline variant calls on chromosome 22, one genotype column per "
             "sample; FORMAT fields include GT; bcftools, pysam or plain text all read it) and meta.json (what the "
             "files hold).")
    stat_source = STAT_SOURCE
    ops = OPS
    dataset_model = Dataset

    def base_data(self, dataset: str | None, datasets: dict[str, Dataset]) -> VData:
        if dataset is None:
            raise BenchmarkError("a clinvar grounding item must name a dataset (grounding.yaml `datasets`)")
        ds = datasets[dataset]
        header, samples, rows = _parsed(ds.source)
        names = list(samples)
        if ds.rename:
            unknown = sorted(set(ds.rename) - set(samples))
            left = sorted(set(samples) - set(ds.rename))
            if unknown or left:
                raise BenchmarkError(f"dataset {dataset}: rename must cover exactly the samples of {SOURCES[ds.source]}"
                                     f" (unknown: {unknown}; not renamed: {left})")
            names = [ds.rename[s] for s in samples]
        # columns in name order, so that no position tells a sample's panel when the names are opaque
        order = sorted(range(len(names)), key=lambda i: names[i])
        d = VData(list(header), [names[i] for i in order], [list(r[:9]) + [r[9 + i] for i in order] for r in rows],
                  ds.source, opaque=bool(ds.rename))
        return _edited(d)

    def null(self, d: VData, rng: np.random.Generator) -> VData:
        return op_null(d, rng)

    def write_version(self, d: VData, root: Path) -> list[str]:
        """calls.vcf with the columns in the data's order, and meta.json describing the files."""
        w = CanonicalWriter(root)
        cols = ["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *d.samples]
        text = "\n".join(d.header + ["\t".join(cols)] + ["\t".join(r) for r in d.rows]) + "\n"
        w.bytes(VCF, text.encode("utf-8"))
        meta = {
            **META[d.source],
            "files": {VCF: ("VCF (uncompressed, no index): one record per variant site, one "
                            "genotype column per sample; FILTER holds the call-set filters (PASS for sites that pass)"),
                      "meta.json": "this description"},
            "n_records": len(d.rows),
            "n_samples": len(d.samples),
            "sample_ids": ("opaque codes assigned for this data set (they do not encode a panel, family or population)"
                           if d.opaque else "the repository's sample identifiers"),
        }
        w.json("meta.json", meta)
        return sorted(w.written)

    def verify_extra(self, item, cls: str, root: Path, data, original: VData) -> list[str]:
        """Sample names unique; a dropped sample or a removed INFO tag appears in no file; a null version keeps no
        record ID; an opaque data set shows no Coriell ID anywhere."""
        problems = []
        if len(set(data["samples"])) != len(data["samples"]):
            problems.append(f"{VCF} repeats a sample name")
        if cls == "withdrawal" and item.withdrawal["op"] == "drop_sample":
            hits = files_mentioning(root, item.withdrawal["sample"])
            if hits:
                problems.append(f"{cls}: dropped sample {item.withdrawal['sample']} still appears in {', '.join(hits)}")
        if cls == "withdrawal" and item.withdrawal["op"] == "remove_info_tag":
            tag = item.withdrawal["tag"]
            if any(tag in r["info"] for r in data["records"]) or files_mentioning(root, tag):
                problems.append(f"{cls}: removed INFO tag {tag} still appears")
        if cls == "null":
            kept = [r["id"] for r in data["records"] if r["id"] != "."]
            if kept:
                problems.append(f"{cls}: {len(kept)} record IDs survive (e.g. {kept[0]})")
        if original is not None and original.opaque:
            leaks = sorted({f for f, t in file_texts(root).items() if CORIELL.search(t)})
            if leaks:
                problems.append(f"{cls}: a Coriell sample ID appears in {', '.join(leaks)} of an opaque data set")
        return problems
