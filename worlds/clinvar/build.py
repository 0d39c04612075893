"""clinvar track: real VCFs from Bioconductor's VariantAnnotation extdata and the recipes that turn them into worlds.

Substrate (real data, no network)
---------------------------------
Two VCFs from the Debian package r-bioc-variantannotation 1.44.1 (`inst/extdata`), fetched by `python -m benchmark data fetch` (track.yaml `data:`)
into .cache/data/variantannotation/ (benchmark.suite.package_data.package_file):

* `hapmap_exome_chr22.vcf.gz` ("exome"): GATK 3.3 HaplotypeCaller + VQSR joint calls of 22 HapMap/CEPH samples on
  chromosome 22, GRCh37 (b37 contig names), 1,011 records with real GT/AD/DP/GQ/PL genotype fields, VQSR FILTER
  tranches and 40 real multi-allelic records. The samples include four complete parent-child trios (CEPH 1463:
  NA12878 with NA12891/NA12892; CEPH 1341: NA07048 with NA07034/NA07055; NA10847 with NA12146/NA12239; Yoruba Y117:
  NA18914 with NA18912/NA18913): every declared trio has <= 3% Mendelian-inconsistent informative sites in these
  data (about 1-2% on the full file), an unrelated "child" about 23-48%. Populations: CEU, YRI, CHB, JPT (HapMap/Coriell catalogue).
* `chr22.vcf.gz` ("g1k"): 1000 Genomes Phase 1 genotypes of five GBR samples (HG00096-HG00101) for chr22:50.30-51.00
  Mb (10,376 records), each record carrying the real Phase 1 allele frequencies: AF (global, 1,092 people), AFR_AF,
  AMR_AF, ASN_AF, EUR_AF (two decimals; a population tag absent from a record means the allele was not seen there).

Seeded models (documented; ClinVar itself is NOT available offline)
-------------------------------------------------------------------
* ClinVar-like tables (`clinvar_like.tsv`): clinical-significance classes (Pathogenic, Likely_pathogenic,
  Uncertain_significance, Likely_benign, Benign, Conflicting_interpretations_of_pathogenicity) and review statuses
  are ASSIGNED by the world's RNG to a drawn subset of REAL variant alleles (real positions and alleles of the
  substrate). They are not real ClinVar assertions; which real alleles receive which class is the world's draw,
  constrained per world as each recipe documents (e.g. a trap world draws some Pathogenic entries onto multi-allelic
  records).
* A proband of African (or East Asian) ancestry (frequency_filter confound worlds): genotypes drawn under
  Hardy-Weinberg equilibrium from the real 1000 Genomes AFR_AF (ASN_AF) of every site. The other samples of those
  worlds are real GBR genotypes.
* No reference FASTA ships, so no defect needs one (no REF checks, no left-alignment).

Every world is a seeded subset of the real records (fractions drawn per world), so no two worlds ship the same
bytes. Sample names: exome worlds keep the real Coriell IDs (meta.json gives population and trios, as a HapMap
sample sheet would); g1k worlds get opaque IDs drawn per world.

Recipes (names registered as "clinvar.<name>")
----------------------------------------------
  use_source(name)                     pick the substrate VCF ("exome" or "g1k")
L1 integrity (exome)
  subsample(fraction, drop_samples)    keep a drawn fraction of records and drop drawn non-trio samples; INFO AC/AN/AF
                                       recomputed from the remaining genotypes (bcftools +fill-tags semantics)
  enrich_filtered(pass_fraction)       boundary: keep every VQSR-filtered record and only a fraction of PASS records
  rename_contig(fraction)              the last `fraction` of records name the contig "chr22" (UCSC) while the header
                                       declares only b37 "22" (a second batch from another pipeline)
  duplicate_records(n)                 n records emitted twice in place (scatter-gather shard boundaries)
  move_block(n)                        a block of n consecutive records moved to the end of the file (shards
                                       concatenated out of order): the file is no longer coordinate-sorted
  truncate(keep)                       the bgzip stream is cut at the BGZF block boundary nearest below `keep` x its
                                       length (interrupted transfer): no EOF marker, the last record cut mid-line
  drop_header_defs(format_tags, info_tags)  ##FORMAT / ##INFO definitions removed while the tags stay in the records
  stale_counts(drop_samples)           samples removed from the genotype columns WITHOUT recomputing INFO AC/AN/AF
  split_unnormalized(keep_multi)       multi-allelic indel records split per ALT without trimming the shared padding
                                       bases (vt decompose without normalize): non-parsimonious indel records
  contaminate(alpha)                   one sample's reads mixed with another sample's DNA at a drawn fraction: AD
                                       redrawn (hom-ref calls with ALT reads, het allele balance shifted), GT kept
  swap_samples(size, unrelated)        the names of `size` sample columns rotate (2: a pair swap; 3: a three-way
                                       rotation): declared trio children of different trios and `unrelated` non-trio
                                       samples (each right after a child), drawn per world
  reheader_build()                     the b37 ##contig lines replaced by the GRCh38 primary contigs (GRCh37 positions
                                       under a GRCh38 header); >= 10 records past GRCh38 chr22's end always remain
  duplicate_individual(discordance, depth_ratio)  a present sample re-sequenced under a dropped sample's ID (one
                                       person twice): depth/AD/PL/GQ redrawn, genotypes called from them, a drawn share
                                       of the low-quality calls re-drawn
L2
  frequency_world(...)                 g1k: a 5-sample call set (proband + 4 batch-mates) restricted to the proband's
                                       annotated candidate variants plus batch-mates' variants; see the docstring
  carrier_world(...)                   exome: cohort VCF + ClinVar-like table for a carrier screen
  findings_world(...)                  g1k: one proband's VCF + ClinVar-like table for reportable findings
  inheritance_world(...)               exome: one real trio's VCF + a candidate-gene table (AR/AD genes, seeded model)
L3
  mendel_dossier()                     per-trio Mendelian consistency tables of the four real exome trios (native)
  tstv_dossier(artifact_sample, rate)  per-sample SNV spectrum tables of the five g1k samples (optionally with
                                       seeded C>A/G>T artefact genotypes injected into one sample)
"""
from __future__ import annotations

import copy
import gzip
import io
import json
import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from benchmark.suite.canonical import CanonicalWriter, _atomic_write
from benchmark.suite.package_data import package_file
from benchmark.suite.registry import recipe, substrate, writer

TRACK = "clinvar"
VCF = "calls.vcf.gz"
POPS = ("AFR_AF", "AMR_AF", "ASN_AF", "EUR_AF")
POPULATION = {
    **{s: "CEU" for s in ("NA07034", "NA07048", "NA07055", "NA10846", "NA10847", "NA12146", "NA12239", "NA12877",
                          "NA12878", "NA12891", "NA12892")},
    **{s: "YRI" for s in ("NA18503", "NA18504", "NA18505", "NA18506", "NA18912", "NA18913", "NA18914")},
    "NA18524": "CHB", "NA18532": "CHB", "NA18940": "JPT", "NA18947": "JPT",
}
TRIOS = [("NA12878", ("NA12891", "NA12892")), ("NA07048", ("NA07034", "NA07055")),
         ("NA10847", ("NA12146", "NA12239")), ("NA18914", ("NA18912", "NA18913"))]
TRIO_MEMBERS = sorted({c for c, _ in TRIOS} | {p for _, ps in TRIOS for p in ps})
BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


@dataclass
class VcfData:
    header: list[str]                  # '##' lines
    samples: list[str]
    rows: list[list[str]]              # CHROM POS ID REF ALT QUAL FILTER INFO FORMAT sample...
    source: str = ""
    meta: dict = field(default_factory=dict)
    tables: dict = field(default_factory=dict)     # name -> DataFrame (written as TSV)
    truncate_at: float | None = None
    dossier: dict | None = None
    declared_records: int | None = None            # n_records meta.json states (set before a defect removes records)
    truth: dict = field(default_factory=dict)      # generative truth (gold side only, CanonicalWriter.truth)


@dataclass
class Sources:
    exome: VcfData
    g1k: VcfData


def _parse(name: str, source: str) -> VcfData:
    header, rows, cols = [], [], []
    with gzip.open(package_file("variantannotation", name), "rt") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line.startswith("##"):
                header.append(line)
            elif line.startswith("#"):
                cols = line[1:].split("\t")
            elif line:
                rows.append(line.split("\t"))
    return VcfData(header=header, samples=cols[9:], rows=rows, source=source)


@substrate("variantannotation_vcfs")
def variantannotation_vcfs(seed: int = 0) -> Sources:
    ex = _parse("hapmap_exome_chr22.vcf.gz", "exome")
    ex.samples = [s.split("@")[0] for s in ex.samples]       # Coriell IDs (the '@' suffix is a lab barcode)
    # header lines that would only leak provenance / tool command lines (kept out of every world)
    ex.header = [h for h in ex.header if not h.startswith(("##GATKCommandLine", "##GVCFBlock", "##bcftools"))]
    g = _parse("chr22.vcf.gz", "g1k")
    return Sources(exome=ex, g1k=g)


# ---------------------------------------------------------------- helpers

def info_dict(info: str) -> dict[str, str]:
    out = {}
    for kv in info.split(";"):
        if not kv or kv == ".":
            continue
        k, _, v = kv.partition("=")
        out[k] = v if _ else ""
    return out


def info_str(d: dict[str, str]) -> str:
    return ";".join(k if v == "" else f"{k}={v}" for k, v in d.items()) or "."


def gt_of(row: list[str], i: int) -> str:
    keys = row[8].split(":")
    vals = row[9 + i].split(":")
    return vals[keys.index("GT")] if "GT" in keys and keys.index("GT") < len(vals) else "./."


def fmt_af(x: float) -> str:
    s = f"{x:.3f}".rstrip("0").rstrip(".")
    return s if s else "0"


def recount(row: list[str], n_samples: int) -> None:
    """INFO AC (per ALT), AN and AF from the genotype columns (bcftools +fill-tags / GATK semantics)."""
    n_alt = len(row[4].split(","))
    ac = [0] * n_alt
    an = 0
    for i in range(n_samples):
        for a in gt_of(row, i).replace("|", "/").split("/"):
            if a == ".":
                continue
            an += 1
            if a != "0":
                ac[int(a) - 1] += 1
    d = info_dict(row[7])
    d["AC"] = ",".join(map(str, ac))
    d["AN"] = str(an)
    d["AF"] = ",".join(fmt_af(c / an) if an else "0" for c in ac)
    row[7] = info_str(d)


def _keep_samples(data: VcfData, keep: list[str]) -> None:
    idx = [data.samples.index(s) for s in keep]
    data.rows = [r[:9] + [r[9 + i] for i in idx] for r in data.rows]
    data.samples = list(keep)


def popmax(info: dict[str, str], prefix: str = "") -> float:
    return max(float(info.get(prefix + k, 0) or 0) for k in ("AF", *POPS))


def key(row: list[str], alt: str | None = None) -> str:
    return f"{row[0]}:{row[1]}:{row[3]}:{alt if alt is not None else row[4]}"


# ---------------------------------------------------------------- generic recipes

@recipe(TRACK, "use_source")
def use_source(data: Sources, rng, name: str) -> VcfData:
    return copy.deepcopy(getattr(data, name))


@recipe(TRACK, "subsample")
def subsample(data: VcfData, rng, fraction: float, drop_samples: int = 0) -> VcfData:
    n = len(data.rows)
    keep = np.sort(rng.choice(n, int(round(fraction * n)), replace=False))
    data.rows = [data.rows[i] for i in keep]
    if drop_samples:
        free = [s for s in data.samples if s not in TRIO_MEMBERS]
        drop = set(rng.choice(free, drop_samples, replace=False).tolist())
        _keep_samples(data, [s for s in data.samples if s not in drop])
    for r in data.rows:
        recount(r, len(data.samples))
    data.rows = [r for r in data.rows if any(int(c) > 0 for c in info_dict(r[7])["AC"].split(","))]
    return data


@recipe(TRACK, "enrich_filtered")
def enrich_filtered(data: VcfData, rng, pass_fraction: float) -> VcfData:
    keep = [r for r in data.rows if r[6] != "PASS" or rng.random() < pass_fraction]
    data.rows = keep
    return data


# ---------------------------------------------------------------- L1 defects

@recipe(TRACK, "rename_contig")
def rename_contig(data: VcfData, rng, fraction: float) -> VcfData:
    n = len(data.rows)
    for r in data.rows[n - int(round(fraction * n)):]:
        r[0] = "chr" + r[0]
    return data


@recipe(TRACK, "duplicate_records")
def duplicate_records(data: VcfData, rng, n: int) -> VcfData:
    dup = set(rng.choice(len(data.rows), n, replace=False).tolist())
    out = []
    for i, r in enumerate(data.rows):
        out.append(r)
        if i in dup:
            out.append(list(r))
    data.rows = out
    return data


@recipe(TRACK, "move_block")
def move_block(data: VcfData, rng, n: int) -> VcfData:
    start = int(rng.integers(len(data.rows) // 10, len(data.rows) - n - len(data.rows) // 10))
    block = data.rows[start:start + n]
    data.rows = data.rows[:start] + data.rows[start + n:] + block
    return data


@recipe(TRACK, "truncate")
def truncate(data: VcfData, rng, keep: float) -> VcfData:
    data.truncate_at = float(keep)
    return data


@recipe(TRACK, "drop_header_defs")
def drop_header_defs(data: VcfData, rng, format_tags: list[str], info_tags: list[str]) -> VcfData:
    gone = {f"##FORMAT=<ID={t}," for t in format_tags} | {f"##INFO=<ID={t}," for t in info_tags}
    data.header = [h for h in data.header if not any(h.startswith(g) for g in gone)]
    return data


@recipe(TRACK, "stale_counts")
def stale_counts(data: VcfData, rng, drop_samples: int) -> VcfData:
    free = [s for s in data.samples if s not in TRIO_MEMBERS] + [c for c, _ in TRIOS]
    drop = set(rng.choice(free, drop_samples, replace=False).tolist())
    _keep_samples(data, [s for s in data.samples if s not in drop])     # INFO deliberately not recomputed
    return data


@recipe(TRACK, "swap_samples")
def swap_samples(data: VcfData, rng, size: int, unrelated: int) -> VcfData:
    """The names of `size` sample columns rotate (size 2: a pair swap; 3: a three-way rotation, as when tubes are
    placed one well off): `size - unrelated` declared trio children of different trios and `unrelated` non-trio
    samples, all drawn from the columns present. Every unrelated sample directly follows a child in the cycle, so
    each mislabelled column is found from the genotypes: a child's label then holds another person's genotypes
    (Mendelian errors against its declared parents) and the column holding that child's genotypes carries the next
    name of the cycle. The writer then sorts the columns by their (new) labels, as in every world, so the header is
    in the canonical order and only the genotypes show the swap."""
    if not 2 <= size or not 0 <= unrelated <= size // 2:
        raise ValueError(f"size must be >= 2 and unrelated at most size // 2, got {size}, {unrelated}")
    kids = [c for c, _ in TRIOS if c in data.samples]
    free = [s for s in data.samples if s not in TRIO_MEMBERS]
    children = [str(x) for x in rng.choice(kids, size - unrelated, replace=False)]
    others = [str(x) for x in rng.choice(free, unrelated, replace=False)] if unrelated else []
    cycle = []
    for k, c in enumerate(children):          # each unrelated sample right after a child
        cycle.append(c)
        if k < len(others):
            cycle.append(others[k])
    idx = [data.samples.index(s) for s in cycle]
    for k, i in enumerate(idx):               # the column of cycle[k] is now labelled cycle[k + 1]
        data.samples[i] = cycle[(k + 1) % len(cycle)]
    return data


def trim_alleles(pos: int, ref: str, alts: list[str]) -> tuple[int, str, list[str]]:
    """Parsimonious representation without a reference (Tan et al. 2015, step 'trim'): drop the last base while every
    allele is longer than one base and all end in the same base, then the first base likewise (POS moves right)."""
    al = [ref, *alts]
    while all(len(a) > 1 for a in al) and len({a[-1] for a in al}) == 1:
        al = [a[:-1] for a in al]
    while all(len(a) > 1 for a in al) and len({a[0] for a in al}) == 1:
        al = [a[1:] for a in al]
        pos += 1
    return pos, al[0], al[1:]


@recipe(TRACK, "split_unnormalized")
def split_unnormalized(data: VcfData, rng, keep_multi: float) -> VcfData:
    """Multi-allelic INDEL records split into biallelic ones by a decomposition that does not trim (vt decompose
    without vt normalize, bcftools norm -m-any without a reference, a per-ALT script): each split record keeps the shared REF of the multi-allelic record, so an
    ALT like GTT>GT is written with a padding base it does not need (parsimonious form GT>G). A drawn share
    `keep_multi` of the multi-allelic SNV records stays unsplit (they have no padding problem). Genotypes are recoded
    per ALT and INFO recounted (clinvar.split_record)."""
    out = []
    for r in data.rows:
        alleles = [r[3], *r[4].split(",")]
        indel = any(len(a) != 1 for a in alleles)
        if "," in r[4] and (indel or rng.random() >= keep_multi):
            out += split_record(r, len(data.samples))
        else:
            out.append(r)
    data.rows = out
    return data


@recipe(TRACK, "contaminate")
def contaminate(data: VcfData, rng, alpha: float) -> VcfData:
    """Cross-sample DNA contamination (VerifyBamID's FREEMIX model, Jun et al. 2012): one drawn sample's reads are a
    mixture of its own DNA (1 - alpha) and another drawn sample's (alpha). At every biallelic SNV record the sample's read
    depth is kept and its ALT read count redrawn as Binomial(depth, (1 - alpha) g_s / 2 + alpha g_c / 2 + 0.002)
    (g: non-reference dosage of the sample and the contaminant; 0.002 the sequencing error). Genotype calls stay as
    they are (at 8-20% contamination the caller keeps most genotypes): the reads show it, the GT column does not.
    Hom-ref calls then carry ALT reads where the contaminant carries the allele, and heterozygous allele balance
    shifts away from 0.5."""
    target, cont = (str(x) for x in rng.choice(data.samples, 2, replace=False))
    si, ci = data.samples.index(target), data.samples.index(cont)
    for r in data.rows:
        if len(r[3]) != 1 or len(r[4]) != 1:       # biallelic SNVs (the sites VerifyBamID reads)
            continue
        keys = r[8].split(":")
        if "AD" not in keys:
            continue
        vals = r[9 + si].split(":")
        j = keys.index("AD")
        if j >= len(vals):
            continue
        try:
            depth = sum(int(x) for x in vals[j].split(","))
        except ValueError:
            continue
        gs = sum(a != "0" for a in gt_of(r, si).replace("|", "/").split("/"))
        gc_al = gt_of(r, ci).replace("|", "/").split("/")
        if "." in gt_of(r, si) or "." in gc_al:
            continue
        gc = sum(a != "0" for a in gc_al)
        p = min((1 - alpha) * gs / 2 + alpha * gc / 2 + 0.002, 0.998)
        alt = int(rng.binomial(depth, p)) if depth else 0
        vals[j] = f"{depth - alt},{alt}"
        r[9 + si] = ":".join(vals)
    data.truth = {**data.truth, "contamination_fraction": float(alpha), "contaminant": cont}
    return data


# GRCh38 primary-assembly contig lengths (NCBI GCA_000001405.15 / Ensembl GRCh38; 1-22, X, Y, MT naming as Ensembl)
GRCH38_LENGTHS = {"1": 248956422, "2": 242193529, "3": 198295559, "4": 190214555, "5": 181538259, "6": 170805979,
                  "7": 159345973, "8": 145138636, "9": 138394717, "10": 133797422, "11": 135086622, "12": 133275309,
                  "13": 114364328, "14": 107043718, "15": 101991189, "16": 90338345, "17": 83257441, "18": 80373285,
                  "19": 58617616, "20": 64444167, "21": 46709983, "22": 50818468, "X": 156040895, "Y": 57227415,
                  "MT": 16569}
MIN_BEYOND_END = 10     # build_mismatch worlds keep at least this many records past the declared GRCh38 chr22 end


@recipe(TRACK, "reheader_build")
def reheader_build(data: VcfData, rng) -> VcfData:
    """GRCh37 calls carried under a GRCh38 header (bcftools reheader --fai GRCh38.fa.fai, or a pipeline template): the
    b37 ##contig lines are replaced by the GRCh38 primary contigs (same '22' naming, GRCh38 lengths,
    assembly=GRCh38), the b37 decoy/unplaced contigs disappear, every other header line (##reference naming the b37
    FASTA included) and every record stays. Records past 50,818,468 (GRCh38 chr22 length) lie beyond the declared
    end; the world refuses fewer than MIN_BEYOND_END of them."""
    out, done = [], False
    for h in data.header:
        if h.startswith("##contig="):
            if not done:
                out += [f"##contig=<ID={c},length={n},assembly=GRCh38>" for c, n in GRCH38_LENGTHS.items()]
                done = True
            continue
        out.append(h)
    data.header = out
    beyond = sum(int(r[1]) > GRCH38_LENGTHS[r[0]] for r in data.rows)
    if beyond < MIN_BEYOND_END:
        raise ValueError(f"reheader_build: only {beyond} records past the GRCh38 contig end (< {MIN_BEYOND_END})")
    data.truth = {**data.truth, "n_beyond_grch38_end": beyond}
    return data


def _pl_from_ad(ref: int, alt: int, err: float = 0.01) -> list[int]:
    """Phred-scaled, normalised biallelic genotype likelihoods (0/0, 0/1, 1/1) of AD under a binomial read model."""
    import math
    ll = []
    for p in (err, 0.5, 1 - err):
        ll.append(ref * math.log10(1 - p) + alt * math.log10(p))
    m = max(ll)
    return [int(round(-10 * (x - m))) for x in ll]


@recipe(TRACK, "duplicate_individual")
def duplicate_individual(data: VcfData, rng, discordance: float, depth_ratio: float) -> VcfData:
    """One person sequenced twice under two sample IDs (a re-submitted library, a relabelled tube): a drawn present
    sample's genotypes are re-sequenced under the ID of a drawn HapMap sample that is not in the call set (one of the
    samples `subsample` dropped), so the cohort's names stay a subset of the real 22 and the writer's canonical column
    order places it like any other. The second library: at every biallelic record where the source is called with AD,
    depth DP' ~ Poisson(DP x depth_ratio), AD' ~ Binomial(DP', p(GT)) (p = 0.01, 0.5, 0.99), PL/PP from AD' (binomial
    read model), GQ = second-lowest PL (cap 99), AB = REF fraction of a het; a drawn share `discordance` of the called
    genotypes is re-drawn at the source's low-quality calls (GQ < 20 or DP < 10): the copy's genotype moves one dosage
    step (0/0 <-> 0/1 <-> 1/1) with AD' drawn from it. Multi-allelic records are copied as they are. INFO AC/AN/AF are
    recomputed (the pipeline joint-called both libraries). meta.json lists the new ID with its catalogue population."""
    free = sorted(s for s in POPULATION if s not in data.samples and s not in TRIO_MEMBERS)
    if not free:
        raise ValueError("duplicate_individual needs a dropped sample ID (subsample drop_samples >= 1)")
    src = str(rng.choice(sorted(data.samples)))
    new = str(rng.choice(free))
    si = data.samples.index(src)
    copies, low = [], []
    for ri, r in enumerate(data.rows):
        keys = r[8].split(":")
        vals = r[9 + si].split(":")
        f = dict(zip(keys, vals))
        g = f.get("GT", "./.").replace("|", "/")
        ok = "," not in r[4] and g in ("0/0", "0/1", "1/1") and "AD" in f and "DP" in f
        if ok:
            try:
                dp = int(f["DP"])
                gq = int(f.get("GQ", "0"))
            except ValueError:
                ok = False
        copies.append(vals if not ok else None)
        if ok and (gq < 20 or dp < 10):
            low.append(ri)
    n_called = sum(1 for r in data.rows if gt_of(r, si).replace("|", "/") in ("0/0", "0/1", "1/1"))
    k = min(len(low), int(round(discordance * n_called)))
    flip = set(int(i) for i in rng.choice(low, k, replace=False)) if k else set()
    discordant = 0
    for ri, r in enumerate(data.rows):
        if copies[ri] is not None:
            continue
        keys = r[8].split(":")
        f = dict(zip(keys, r[9 + si].split(":")))
        dos = {"0/0": 0, "0/1": 1, "1/1": 2}[f["GT"].replace("|", "/")]
        if ri in flip:
            dos = {0: 1, 2: 1}.get(dos, int(rng.choice([0, 2])))
        dp = int(rng.poisson(max(int(f["DP"]), 1) * depth_ratio))
        alt = (0, int(rng.binomial(dp, 0.5)), dp)[dos]          # homozygous calls: reads of one allele only
        pl = _pl_from_ad(dp - alt, alt)
        dos_called = int(np.argmin(pl)) if dp else dos
        gt = ("0/0", "0/1", "1/1")[dos_called]
        discordant += gt != f["GT"].replace("|", "/")
        srt = sorted(pl)
        nf = dict(f)
        nf.update({"GT": gt, "AD": f"{dp - alt},{alt}", "DP": str(dp), "GQ": str(min(99, srt[1] - srt[0])),
                   "PL": ",".join(map(str, pl))})
        if "PP" in nf:
            nf["PP"] = nf["PL"]
        if "AB" in nf:
            nf["AB"] = f"{(dp - alt) / dp:.2f}" if gt == "0/1" and dp else "."
        if "PGT" in nf and gt != "0/1":
            nf["PGT"], nf["PID"] = ".", "."
        copies[ri] = [nf[x] for x in keys]
    for ri, r in enumerate(data.rows):
        r.append(":".join(copies[ri]))
        recount(r, len(data.samples) + 1)
    data.samples = data.samples + [new]
    if data.meta.get("samples") is not None:
        smp = dict(data.meta["samples"])
        smp[new] = {"population": POPULATION[new]}
        data.meta["samples"] = {s: smp[s] for s in sorted(smp)}
    data.truth = {**data.truth, "duplicate_pair": sorted([src, new]), "n_discordant_genotypes": discordant}
    return data


@recipe(TRACK, "l1_meta")
def l1_meta(data: VcfData, rng) -> VcfData:
    """meta.json of an exome call set: what a sequencing core's delivery sheet says (written before any defect)."""
    data.declared_records = len(data.rows)
    data.meta = {
        "assay": "whole-exome sequencing, GATK HaplotypeCaller joint genotyping with VQSR filtering (FILTER column)",
        "reference": "GRCh37 (b37 contig names: 1-22, X, Y, MT; no 'chr' prefix)",
        "region": "chromosome 22",
        "samples": {s: {"population": POPULATION[s]} for s in sorted(data.samples)},
        "trios": [{"child": c, "parents": list(p)} for c, p in TRIOS if c in data.samples],
    }
    return data


# ---------------------------------------------------------------- L2: frequency_filter (g1k)

# No decision at a threshold (issue 18). Every allele frequency a golden compares with a cut-off sits at least MARGIN
# times away from it (popmax and global AF <= cut-off / 1.5 for "rare", >= 1.5 x cut-off for "common"), so the
# decision reads the same from the VCF's decimal text, from float32 (pysam, bcftools) and from the filtering allele
# frequency of Whiffin et al. 2017 (faf95: the lower bound of the one-sided 95% Poisson interval of the allele count,
# with the 1000 Genomes Phase 1 allele numbers below), which the recipes also require to agree.
MARGIN = 1.5
POP_AN = {"AF": 2184, "AFR_AF": 492, "AMR_AF": 362, "ASN_AF": 572, "EUR_AF": 758}   # 2 x 1,092 / 246 / 181 / 286 / 379


def faf95(af: float, an: int) -> float:
    """Whiffin et al. (2017) filtering allele frequency: the largest true AF at which the observed allele count
    (af x an) would be seen with probability <= 5% (one-sided 95% lower Poisson bound), 0 for an unseen allele."""
    from scipy.stats import chi2

    ac = int(round(af * an))
    return float(chi2.ppf(0.05, 2 * ac) / 2 / an) if ac > 0 else 0.0


def filtering_faf(info: dict[str, str], prefix: str = "") -> float:
    return max(faf95(float(info.get(prefix + k, 0) or 0), an) for k, an in POP_AN.items())


def _hwe_genotypes(rng, af: np.ndarray) -> np.ndarray:
    return rng.binomial(2, np.clip(af, 0, 1))


@recipe(TRACK, "frequency_world")
def frequency_world(data: VcfData, rng, proband: str, threshold: float, n_rare: int, n_trap: int, n_common: int,
                    n_other: int, cohort_af: bool = False) -> VcfData:
    """A 5-sample call set (the proband + 4 batch-mates) restricted to the proband's annotated candidate variants
    (n_rare with popmax AF <= threshold / 1.5; n_trap with global AF <= threshold / 1.5 and the AF of some population
    >= 1.5 x threshold, its filtering AF (faf95) above the threshold too; n_common with global AF >= 1.5 x threshold and
    global faf95 above it) plus n_other variants carried only by batch-mates. No carried variant sits within the 1.5x
    margin of the cut-off, so text, float32 and bcftools readings and a popmax or faf95 filter all agree. proband = "GBR" (a real GBR sample,
    drawn) or a population tag (AFR_AF, ASN_AF): genotypes drawn under HWE from that real 1000G frequency.
    cohort_af: INFO AC/AN/AF are recomputed from the five samples and the 1000 Genomes values move to KG_* tags."""
    infos = [info_dict(r[7]) for r in data.rows]
    G = np.array([[sum(a != "0" for a in gt_of(r, i).replace("|", "/").split("/")) for i in range(5)] for r in data.rows])
    order = rng.permutation(5)
    glob = np.array([float(d["AF"]) for d in infos])
    pm = np.array([popmax(d) for d in infos])
    faf = np.array([filtering_faf(d) for d in infos])
    faf_glob = np.array([faf95(float(d["AF"]), POP_AN["AF"]) for d in infos])
    snv = np.array([len(r[3]) == 1 and len(r[4]) == 1 for r in data.rows])
    lo, hi = threshold / MARGIN, threshold * MARGIN     # no decision at the cut-off (issue 18): a stated margin
    want = {"rare": n_rare, "trap": n_trap, "common": n_common, "other": n_other}
    for attempt in range(500):
        # an ancestry proband's genotypes are drawn under HWE, conditioned on carrying enough variants of each group
        if proband == "GBR":
            pb = G[:, order[0]]
            mates = order[1:]
        else:
            pb = _hwe_genotypes(rng, np.array([float(d.get(proband, 0) or 0) for d in infos]))
            mates = order[:4]
        car = (pb > 0) & snv
        groups = {"rare": car & (pm <= lo),
                  "trap": car & (glob <= lo) & (pm >= hi) & (faf > threshold),
                  "common": car & (glob >= hi) & (faf_glob > threshold),
                  "other": (pb == 0) & snv & (G[:, mates].sum(1) > 0) & (glob < 0.3)}
        short = {k: int(groups[k].sum()) for k in want if groups[k].sum() < want[k]}
        if not short or proband == "GBR":
            break
    if short:
        raise ValueError(f"frequency_world: too few variants at least {MARGIN}x from the cut-off {threshold} "
                         f"({short} for {want}); lower the drawn counts in the world's recipe")
    pick = []
    for name, n in (("rare", n_rare), ("trap", n_trap), ("common", n_common), ("other", n_other)):
        idx = np.flatnonzero(groups[name])
        if len(idx) < n:
            raise ValueError(f"frequency_world: only {len(idx)} {name} variants for n={n}")
        pick += rng.choice(idx, n, replace=False).tolist()
    pick = sorted(pick)
    names = _opaque_ids(rng, 5)
    rows = []
    for i in pick:
        r = data.rows[i]
        gts = [_gt_str(pb[i], rng)] + [_gt_str(G[i, m], rng) for m in mates]
        d = {k: v for k, v in infos[i].items() if k in ("AC", "AN", "AF", *POPS, "VT", "AA")}
        if cohort_af:
            kg = {f"KG_{k}": v for k, v in d.items() if k in ("AC", "AN", "AF", *POPS)}
            d = {k: v for k, v in d.items() if k not in kg and f"KG_{k}" not in kg}
            d.update(kg)
        rows.append(r[:7] + [info_str(d), "GT"] + gts)
    data.rows = rows
    data.samples = names
    if cohort_af:
        for r in data.rows:
            recount(r, 5)
        data.rows = [r[:7] + [_order_info(r[7])] + r[8:] for r in data.rows]
    data.header = _g1k_header(cohort_af)
    order_names = sorted(names)
    data.meta = {
        "assay": "low-coverage whole-genome sequencing, 1000 Genomes Phase 1 style calls (GRCh37, chr22:50.3-51.0 Mb)",
        "task": {"proband": names[0], "max_allele_frequency": threshold,
                 "proband_ancestry": {"GBR": "European (British)", "AFR_AF": "African (Yoruba, Nigeria)",
                                      "ASN_AF": "East Asian (Han Chinese)"}[proband],
                 "disorder": "a rare Mendelian disorder (prevalence < 1 in 10,000)",
                 "frequency_screen": "max_allele_frequency is the laboratory's lenient first-pass cut-off; "
                                     "disease-specific BS1 thresholds are applied later"},
        "samples": order_names,
        "records": "the proband's variants that passed the annotation step (candidate variants) and variants of the "
                   "other samples sequenced in the same batch",
        "allele_frequency_tags": "a population allele-frequency tag absent from a record means the allele was not "
                                 "observed in that population",
    }
    return data


def _order_info(info: str) -> str:
    d = info_dict(info)
    first = {k: d[k] for k in ("AC", "AN", "AF") if k in d}
    return info_str({**first, **{k: v for k, v in d.items() if k not in first}})


def _gt_str(g: int, rng) -> str:
    return {0: "0/0", 1: "0/1", 2: "1/1"}[int(g)]


def _opaque_ids(rng, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        s = "S" + "".join(rng.choice(list("0123456789"), 5))
        if s not in out:
            out.append(s)
    return out


def _g1k_header(cohort_af: bool) -> list[str]:
    pop = {"AFR_AF": "AFR", "AMR_AF": "AMR", "ASN_AF": "ASN", "EUR_AF": "EUR"}
    h = ["##fileformat=VCFv4.1", "##FILTER=<ID=PASS,Description=\"All filters passed\">",
         "##reference=GRCh37", "##contig=<ID=22,length=51304566,assembly=b37>"]
    kg = "KG_" if cohort_af else ""
    if cohort_af:
        h += ['##INFO=<ID=AC,Number=A,Type=Integer,Description="Allele count in genotypes of this call set">',
              '##INFO=<ID=AN,Number=1,Type=Integer,Description="Total number of alleles in called genotypes of this call set">',
              '##INFO=<ID=AF,Number=A,Type=Float,Description="Allele frequency in the samples of this call set (AC/AN)">']
    h += [f'##INFO=<ID={kg}AC,Number=.,Type=Integer,Description="Alternate Allele Count (1000 Genomes Phase 1, 1,092 individuals)">',
          f'##INFO=<ID={kg}AN,Number=1,Type=Integer,Description="Total Allele Count (1000 Genomes Phase 1, 1,092 individuals)">',
          f'##INFO=<ID={kg}AF,Number=1,Type=Float,Description="Global Allele Frequency based on AC/AN (1000 Genomes Phase 1)">']
    for k, p in pop.items():
        h.append(f'##INFO=<ID={kg}{k},Number=1,Type=Float,Description="Allele Frequency for samples from {p} based on AC/AN (1000 Genomes Phase 1)">')
    h += ['##INFO=<ID=VT,Number=1,Type=String,Description="indicates what type of variant the line represents">',
          '##INFO=<ID=AA,Number=1,Type=String,Description="Ancestral Allele">',
          '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">']
    return h


# ---------------------------------------------------------------- ClinVar-like tables

SIG_PLP = ("Pathogenic", "Likely_pathogenic", "Pathogenic/Likely_pathogenic")
SIG_OTHER = ("Uncertain_significance", "Likely_benign", "Benign", "Benign/Likely_benign")
CONFLICTING = "Conflicting_interpretations_of_pathogenicity"
REVIEW = {"Pathogenic": ["criteria_provided,_single_submitter", "criteria_provided,_multiple_submitters,_no_conflicts",
                         "reviewed_by_expert_panel"],
          CONFLICTING: ["criteria_provided,_conflicting_interpretations"]}


def _review(rng, sig: str) -> str:
    pool = REVIEW.get(sig, REVIEW["Pathogenic"])
    return str(pool[int(rng.integers(len(pool)))])


def _clinvar_table(rng, entries: list[tuple[str, str, str, str, str]], chrom_prefix: str = "") -> pd.DataFrame:
    """entries: (chrom, pos, ref, alt, significance) -> a ClinVar-like table, sorted by position, with drawn IDs."""
    ids = rng.choice(np.arange(100000, 999999), len(entries), replace=False)
    rows = []
    for (c, p, r, a, s), vid in zip(entries, ids):
        rows.append({"variation_id": int(vid), "chrom": chrom_prefix + c, "pos": int(p), "ref": r, "alt": a,
                     "clinical_significance": s, "review_status": _review(rng, s)})
    df = pd.DataFrame(rows)
    return df.sort_values(["pos", "ref", "alt"]).reset_index(drop=True)


# ---------------------------------------------------------------- L2: carrier_screen (exome)

def _genotype_fields(row: list[str], i: int) -> dict[str, str]:
    return dict(zip(row[8].split(":"), row[9 + i].split(":")))


# Call quality with no call near a filter's cut-off (issue 18): a carrier call at a P/LP entry is either clearly
# confident (GQ >= 30 and DP >= 10) or clearly not (GQ < 10 and DP < 6), so every standard genotype filter (GQ >= 20
# and DP >= 10, GQ >= 30, DP >= 8, GQ >= 20 alone ...) keeps and drops the same calls.
CLEAR_GQ, CLEAR_DP = 30, 10
LOW_GQ, LOW_DP = 10, 6


def call_quality(d: dict[str, str]) -> str:
    """'confident', 'low' or 'ambiguous' (between the two: a world must hold none at a P/LP entry)."""
    try:
        gq, dp = int(d.get("GQ", "0")), int(d.get("DP", "0"))
    except ValueError:
        return "ambiguous"
    if gq >= CLEAR_GQ and dp >= CLEAR_DP:
        return "confident"
    return "low" if gq < LOW_GQ and dp < LOW_DP else "ambiguous"


def _confident(d: dict[str, str]) -> bool:
    return call_quality(d) == "confident"


def _low_call(keys: list[str], rng) -> str:
    """A low-coverage false heterozygous call: depth 2-5 with one or two ALT reads, GQ 3-9 (0/1 barely preferred)."""
    dp = int(rng.integers(2, 6))
    alt = 1 if dp <= 3 else int(rng.integers(1, 3))
    gq = int(rng.integers(3, 10))
    vals = {"GT": "0/1", "AD": f"{dp - alt},{alt}", "DP": str(dp), "GQ": str(gq),
            "PL": f"{gq},0,{int(rng.integers(30, 90))}"}
    return ":".join(vals.get(k, ".") for k in keys)


@recipe(TRACK, "carrier_world")
def carrier_world(data: VcfData, rng, fraction: float, n_plp: int, n_multi: int, n_lowgq: int, n_absent: int,
                  n_other: int, split_multiallelic: bool = True, chrom_prefix: str = "") -> VcfData:
    """Cohort VCF (a drawn fraction of records, all 22 samples) + ClinVar-like table. P/LP entries: n_multi on an ALT
    of a real multi-allelic SNV record, n_plp on PASS biallelic records whose every real non-reference call is clearly
    confident (GQ >= 30 and DP >= 10), n_lowgq on such records to which 1-3 clearly low-confidence heterozygous calls
    are added (seeded model of low-coverage false carriers: hom-ref samples recalled 0/1 at depth 2-5 with one or two
    ALT reads and GQ 3-9, as at poorly covered exome targets; the real calls stay as they are);
    n_absent P/LP entries on real alleles whose records are not in this world's subset; n_other VUS/benign entries.
    split_multiallelic: records are split into biallelic ones (bcftools norm -m-any) before writing."""
    rows = data.rows
    n = len(rows)
    snv_multi = [i for i, r in enumerate(rows) if "," in r[4] and r[6] == "PASS" and len(r[3]) == 1
                 and all(len(a) == 1 for a in r[4].split(","))]
    bial = [i for i, r in enumerate(rows) if "," not in r[4] and r[6] == "PASS"]

    def calls(i, allele="1"):
        out = []
        for s in range(len(data.samples)):
            d = _genotype_fields(rows[i], s)
            if allele in d.get("GT", "./.").replace("|", "/").split("/"):
                out.append(_confident(d))
        return out

    good = [i for i in bial if calls(i) and all(calls(i))]
    multi_entries = []
    for i in snv_multi:
        for k, a in enumerate(rows[i][4].split(","), start=1):
            c = calls(i, str(k))
            if c and all(c):
                multi_entries.append((i, a))
    pick_multi = [multi_entries[j] for j in rng.choice(len(multi_entries), n_multi, replace=False)] if n_multi else []
    used = {i for i, _ in pick_multi}
    def homref_of(row):
        return [s for s in range(len(data.samples)) if _genotype_fields(row, s).get("GT", "").replace("|", "/") == "0/0"]

    low_pool = [i for i in good if i not in used and homref_of(rows[i])]  # a low call replaces a hom-ref sample
    if len(low_pool) < n_lowgq:
        raise ValueError(f"carrier_world: only {len(low_pool)} entries with a hom-ref sample for n_lowgq={n_lowgq}")
    pick_low = [int(i) for i in rng.choice(low_pool, n_lowgq, replace=False)] if n_lowgq else []
    used |= set(pick_low)
    rows = [list(r) for r in rows]
    for i in pick_low:
        homref = homref_of(rows[i])
        keys = rows[i][8].split(":")
        k = min(int(rng.integers(1, 4)), len(homref))  # 1-3 samples, as many as the entry has hom-ref calls
        for s in sorted(int(x) for x in rng.choice(homref, k, replace=False)):
            rows[i][9 + s] = _low_call(keys, rng)
    pick_good = [int(i) for i in rng.choice([i for i in good if i not in used], n_plp, replace=False)]
    used |= set(pick_good)
    rest = [i for i in range(n) if i not in used]
    n_keep = int(round(fraction * n)) - len(used)
    keep_rest = rng.choice(rest, n_keep, replace=False).tolist()
    absent_pool = [i for i in rest if i not in set(keep_rest) and "," not in rows[i][4]]
    pick_absent = [int(i) for i in rng.choice(absent_pool, n_absent, replace=False)]
    other_pool = [i for i in keep_rest if "," not in rows[i][4]]
    pick_other = [int(i) for i in rng.choice(other_pool, n_other, replace=False)]
    entries = []
    plp = lambda: SIG_PLP[int(rng.integers(len(SIG_PLP)))]  # noqa: E731
    for i, a in pick_multi:
        entries.append((rows[i][0], rows[i][1], rows[i][3], a, plp()))
    for i in pick_low + pick_good + pick_absent:
        entries.append((rows[i][0], rows[i][1], rows[i][3], rows[i][4], plp()))
    for i in pick_other:
        entries.append((rows[i][0], rows[i][1], rows[i][3], rows[i][4], SIG_OTHER[int(rng.integers(len(SIG_OTHER)))]))
    keep = sorted(used | set(keep_rest))
    data.rows = [rows[i] for i in keep]
    for r in data.rows:
        recount(r, len(data.samples))
    if split_multiallelic:
        data.rows = [s for r in data.rows for s in split_record(r, len(data.samples))]
    data.tables["clinvar_like.tsv"] = _clinvar_table(rng, entries, chrom_prefix)
    data.meta = {
        "assay": "whole-exome sequencing of a research cohort, GATK HaplotypeCaller joint genotyping (GRCh37, chromosome 22)",
        "samples": {s: {"population": POPULATION[s]} for s in sorted(data.samples)},
        "clinvar_like.tsv": "variant-level clinical significance table (ClinVar variant_summary style): variation_id, "
                            "chrom, pos, ref, alt, clinical_significance, review_status",
    }
    return data


def split_record(row: list[str], n_samples: int) -> list[list[str]]:
    """bcftools norm -m-any for SNV/indel records without a reference: one record per ALT, genotypes recoded (the
    other ALTs become 0), AD reduced to (ref, this alt), PL/PP to the three biallelic genotypes, INFO recounted."""
    alts = row[4].split(",")
    if len(alts) == 1:
        return [row]
    keys = row[8].split(":")
    out = []
    for k, a in enumerate(alts, start=1):
        r = row[:4] + [a] + row[5:9]
        for s in range(n_samples):
            vals = row[9 + s].split(":")
            d = dict(zip(keys, vals))
            new = []
            for kk in keys[:len(vals)]:
                v = d[kk]
                if kk == "GT":
                    sep = "|" if "|" in v else "/"
                    v = sep.join(x if x in (".", "0") else ("1" if x == str(k) else "0") for x in v.replace("|", "/").split("/"))
                elif kk == "AD" and v != ".":
                    parts = v.split(",")
                    v = f"{parts[0]},{parts[k]}" if len(parts) > k else v
                elif kk in ("PL", "PP") and v != ".":
                    parts = v.split(",")
                    idx = [0, k * (k + 1) // 2, k * (k + 1) // 2 + k]
                    v = ",".join(parts[j] for j in idx) if len(parts) > idx[-1] else v
                new.append(v)
            r.append(":".join(new))
        d = info_dict(r[7])
        for t in ("MLEAC", "MLEAF"):
            if t in d and "," in d[t]:
                d[t] = d[t].split(",")[k - 1]
        r[7] = info_str(d)
        recount(r, n_samples)
        out.append(r)
    return out


# ---------------------------------------------------------------- L2: inheritance (exome trios)

def _dos(row: list[str], i: int) -> int | None:
    g = gt_of(row, i).replace("|", "/").split("/")
    return None if "." in g else sum(a != "0" for a in g)


def _prior_lift(row: list[str]) -> int:
    """How much the record's INFO PG prior raises a hom-ref call's GQ (PG[het] - PG[hom-ref]); 0 without a prior."""
    info = dict(kv.split("=", 1) for kv in row[7].split(";") if "=" in kv)
    try:
        pg = [int(x) for x in info["PG"].split(",")]
    except (KeyError, ValueError):
        return 0
    return pg[1] - pg[0] if len(pg) == 3 else 0


def _homref_pl_per_read(rows: list[list[str]], n_samples: int) -> list[tuple[float, float]]:
    """(PL[het], PL[hom-alt]) / DP of the file's own confident hom-ref calls, sorted by the first: how much likelihood
    a reference read carries here."""
    out = []
    for r in rows:
        for i in range(n_samples):
            d = _genotype_fields(r, i)
            try:
                dp, pl = int(d.get("DP", "0")), [int(x) for x in d.get("PL", "").split(",")]
            except ValueError:
                continue
            if d.get("GT") == "0/0" and dp >= CLEAR_DP and len(pl) == 3 and pl[0] == 0:
                out.append((pl[1] / dp, pl[2] / dp))
    return sorted(out)


def _homref_call(row: list[str], depth: int, gq: int | None = None,
                 per_read: tuple[float, float] | None = None) -> str:
    """A hom-ref call on `depth` reads, none ALT, written as the pipeline writes every other call of the file: GATK
    likelihoods PL = (0, PL1, PL2); posteriors PP = PL + the record's INFO PG prior, less their minimum
    (CalculateGenotypePosteriors); GQ the second-lowest PP (cap 99). (PL1, PL2) are `per_read` x depth (a confident
    call's likelihoods follow its reads, as the file's own calls do), or else PL1 is set for GQ = `gq` and PL2 is
    10 x depth (a low call). A call
    with PP = PL would be the only one of the file that skipped the prior, and a 30-read call whose PL1 is a sixth of
    the file's per-read typical is another: careful analysts read both as edits (issue 38 blind-analyst studies)."""
    keys = row[8].split(":")
    info = dict(kv.split("=", 1) for kv in row[7].split(";") if "=" in kv)
    try:
        pg = [int(x) for x in info["PG"].split(",")][:3]
    except (KeyError, ValueError):
        pg = []
    pg = pg if len(pg) == 3 and "PP" in keys else [0, 0, 0]
    pl1 = max(1, round(per_read[0] * depth)) if per_read is not None else max(1, gq - (pg[1] - pg[0]))
    pl2 = round(per_read[1] * depth) if per_read is not None else 10 * depth
    pl = [0, pl1, max(pl2, pl1 + 1, pg[0] - pg[2] + 1)]  # hom-ref stays the best posterior
    pp = [a + b for a, b in zip(pl, pg)]
    pp = [x - min(pp) for x in pp]
    vals = {"GT": "0/0", "AD": f"{depth},0", "DP": str(depth), "GQ": str(min(99, sorted(pp)[1])),
            "PL": ",".join(map(str, pl)), "PP": ",".join(map(str, pp))}
    return ":".join(vals.get(k, ".") for k in keys)


@recipe(TRACK, "inheritance_world")
def inheritance_world(data: VcfData, rng, fraction: float, n_hom: int, n_trans: int, n_denovo: int, n_absent: int,
                      n_single: int = 0, n_cis: int = 0, n_dropout: int = 0, window: int = 300000) -> VcfData:
    """A trio VCF (one of the four real HapMap trios, drawn; the child is the affected proband) and a candidate table
    (seeded model of an annotation pipeline's output: rare predicted-damaging variants, each with a gene and the gene's
    established inheritance mode). Genes are opaque names; every candidate sits on a real biallelic PASS record whose
    three real trio calls are clearly confident (GQ >= 30, DP >= 10), except the edits below. Gene kinds:
      n_hom     AR gene, one variant the child carries homozygous, both parents het (real genotypes)  -> explained
      n_trans   AR gene, two child hets within `window` bp, one from each parent (real: child/parent het, the other
                parent hom-ref, at each)                                                           -> explained
      n_denovo  AD gene, a child het whose carrying parent's call is replaced by a confident hom-ref call (15-40 reads,
                none ALT, PL per read drawn from the file's own confident hom-ref calls): a de novo variant (seeded
                edit)                                                                               -> explained
      n_absent  AR or AD gene whose variant only a parent carries                                        -> not
      n_single  AR gene, ONE child het inherited from one parent (a carrier)                           -> not
      n_cis     AR gene, two child hets within `window` bp BOTH from the same parent (the other parent hom-ref at
                both): one gene copy hit twice, the other intact                                      -> not
      n_dropout AD gene, a child het inherited from a het parent whose call is replaced by a low-coverage hom-ref
                (2-5 reads, none ALT, GQ 3-9: allelic dropout), the other parent confident hom-ref  -> not
    The VCF keeps the trio's columns over a drawn `fraction` of the records (plus every candidate), INFO recounted."""
    t = int(rng.integers(len(TRIOS)))
    child, parents = TRIOS[t]
    trio = [child, *parents]
    _keep_samples(data, trio)
    rows = data.rows
    C, P1, P2 = 0, 1, 2

    def confident(r):
        return all(_dos(r, i) is not None and call_quality(_genotype_fields(r, i)) == "confident" for i in range(3))

    ok = [i for i, r in enumerate(rows) if "," not in r[4] and r[6] == "PASS" and confident(r)]
    pat = {i: tuple(_dos(rows[i], j) for j in range(3)) for i in ok}
    used: set[int] = set()

    def free(pred, where=None):
        return [i for i in ok if i not in used and pred(pat[i]) and (where is None or where(i))]

    def take(pred, k, where=None):
        pool = free(pred, where)
        if len(pool) < k:
            raise ValueError(f"inheritance_world: only {len(pool)} records for {k}")
        got = [int(x) for x in rng.choice(pool, k, replace=False)] if k else []
        used.update(got)
        return got

    def take_pair(pa, pb):
        a_pool = free(pa)
        for a in rng.permutation(a_pool):
            a = int(a)
            near = [b for b in free(pb) if b != a and abs(int(rows[b][1]) - int(rows[a][1])) <= window]
            if near:
                b = int(rng.choice(near))
                used.update((a, b))
                return sorted((a, b), key=lambda i: int(rows[i][1]))
        raise ValueError("inheritance_world: no record pair within the window")

    het_from1 = lambda g: g == (1, 1, 0)  # noqa: E731   child het, parent 1 het, parent 2 hom-ref
    het_from2 = lambda g: g == (1, 0, 1)  # noqa: E731
    genes = []      # (kind, mode, [row indices])
    for _ in range(n_hom):
        genes.append(("hom", "AR", take(lambda g: g == (2, 1, 1), 1)))     # both parents het carriers (unaffected)
    for _ in range(n_trans):
        genes.append(("trans", "AR", take_pair(het_from1, het_from2)))
    for _ in range(n_cis):
        first = rng.random() < 0.5
        pick = het_from1 if first else het_from2
        genes.append(("cis", "AR", take_pair(pick, pick)))
    for _ in range(n_single):
        genes.append(("single", "AR", take(lambda g: g in ((1, 1, 0), (1, 0, 1)), 1)))
    for _ in range(n_absent):
        genes.append(("absent", str(rng.choice(["AR", "AD"])), take(lambda g: g[0] == 0 and (g[1] == 1 or g[2] == 1), 1)))
    edits = {}
    typical = _homref_pl_per_read(rows, 3)
    for _ in range(n_denovo):
        (i,) = take(lambda g: g in ((1, 1, 0), (1, 0, 1)), 1)
        par = P1 if pat[i][1] == 1 else P2
        d = int(rng.integers(15, 41))
        # the per-read likelihood of one of the file's own confident hom-ref calls, from its middle half
        mid = typical[len(typical) // 4: 3 * len(typical) // 4]
        per_read = mid[int(rng.integers(len(mid)))] if mid else (3.0, 40.0)
        edits[(i, par)] = _homref_call(rows[i], d, per_read=per_read)
        genes.append(("denovo", "AD", [i]))
    for _ in range(n_dropout):
        # a site whose population prior (INFO PG) leaves a 2-5-read hom-ref call clearly low (GQ < 10), as it must be
        (i,) = take(lambda g: g in ((1, 1, 0), (1, 0, 1)), 1, where=lambda i: _prior_lift(rows[i]) <= 2)
        par = P1 if pat[i][1] == 1 else P2
        edits[(i, par)] = _homref_call(rows[i], int(rng.integers(2, 6)), int(rng.integers(3, 8)))
        genes.append(("dropout", "AD", [i]))
    for (i, par), val in edits.items():
        rows[i][9 + par] = val
    names = []
    while len(names) < len(genes):
        g = "CG" + "".join(rng.choice(list("0123456789"), 4))
        if g not in names:
            names.append(g)
    entries, truth = [], {}
    for (kind, mode, idx), gname in zip(genes, names):
        truth[gname] = kind
        for i in idx:
            r = rows[i]
            entries.append({"chrom": r[0], "pos": int(r[1]), "ref": r[3], "alt": r[4], "gene": gname,
                            "inheritance_mode": mode})
    cand = {i for _, _, idx in genes for i in idx}
    keep = sorted(cand | {i for i in range(len(rows)) if i not in cand and rng.random() < fraction})
    data.rows = [rows[i] for i in keep]
    for r in data.rows:
        recount(r, 3)
    data.rows = [r for r in data.rows if any(int(c) > 0 for c in info_dict(r[7])["AC"].split(","))]
    table = pd.DataFrame(entries).sort_values(["pos", "ref", "alt"]).reset_index(drop=True)
    data.tables["candidates.tsv"] = table
    data.truth = {"gene_kind": truth,
                  "explained_genes": sorted(g for g, k in truth.items() if k in ("hom", "trans", "denovo"))}
    data.meta = {
        "assay": "whole-exome sequencing of a parent-child trio, GATK HaplotypeCaller joint genotyping (GRCh37, "
                 "chromosome 22), with GT, AD, DP, GQ and PL per sample",
        "family": {"proband": child, "parents": list(parents),
                   "phenotype": "the proband is affected by a rare, severe, fully penetrant Mendelian disorder; both "
                                "parents are unaffected"},
        "candidates.tsv": "the annotation pipeline's candidate variants (rare, predicted damaging) found in any family "
                          "member: chrom, pos, ref, alt, gene, inheritance_mode (the gene's established mode: AR "
                          "autosomal recessive, AD autosomal dominant)",
    }
    return data


# ---------------------------------------------------------------- L2: reportable_findings (g1k)

@recipe(TRACK, "findings_world")
def findings_world(data: VcfData, rng, n_true: int, n_conflicting: int, n_common_p: int, n_pos_only: int,
                   n_vus: int, n_benign: int, n_absent: int) -> VcfData:
    """One real GBR proband's VCF (a drawn 40-60% of the window's records the proband carries, plus records carried
    only by others: it is a 1-sample VCF, so those are 0/0 calls) and a ClinVar-like table: n_true P/LP entries on
    rare (popmax AF < 0.01) variants the proband carries; n_conflicting Conflicting_interpretations entries on carried
    variants; n_common_p P/LP entries on carried variants common globally (global AF >= 0.075 = 1.5 x the BA1 5%, over
    2,184 alleles, so BA1 holds under the ClinGen minimum-allele-number rule and on any reading); n_pos_only
    P/LP entries at carried positions but with a different ALT base (a different allele); n_vus / n_benign entries on
    carried variants; n_absent P/LP entries on real variants the proband does not carry."""
    infos = [info_dict(r[7]) for r in data.rows]
    pm = np.array([popmax(d) for d in infos])
    snv = np.array([len(r[3]) == 1 and len(r[4]) == 1 for r in data.rows])
    for s in rng.permutation(5):      # a real GBR proband with enough rare variants for n_true
        G = np.array([sum(a != "0" for a in gt_of(r, int(s)).replace("|", "/").split("/")) for r in data.rows])
        if ((G > 0) & snv & (pm < 0.01)).sum() >= n_true:
            break
    car = np.flatnonzero((G > 0) & snv)
    non = np.flatnonzero((G == 0) & snv)
    rare = [i for i in car if pm[i] < 0.01]
    glob = np.array([float(d["AF"]) for d in infos])
    # BA1 is AF > 5% in a continental population of >= 2,000 alleles (Ghosh et al. 2018): a common P/LP entry has a
    # GLOBAL AF (2,184 alleles) >= 1.5 x 5%, so the decision holds on popmax, on the global AF and on any float reading
    common = [i for i in car if glob[i] >= MARGIN * 0.05]
    mid = [i for i in car if 0.01 <= pm[i]]
    used: set[int] = set()

    def take(pool, k):
        pool = [int(i) for i in pool if int(i) not in used]
        got = [int(i) for i in rng.choice(pool, k, replace=False)] if k else []
        used.update(got)
        return got

    true = take(rare, n_true)
    conf = take(mid + rare, n_conflicting)
    comm = take(common, n_common_p)
    pos_only = take(mid, n_pos_only)
    vus = take(car, n_vus)
    ben = take(common, n_benign)
    absent = take(non, n_absent)
    entries = []
    plp = lambda: SIG_PLP[int(rng.integers(len(SIG_PLP)))]  # noqa: E731
    r_ = data.rows
    for i in true + comm + absent:
        entries.append((r_[i][0], r_[i][1], r_[i][3], r_[i][4], plp()))
    for i in conf:
        entries.append((r_[i][0], r_[i][1], r_[i][3], r_[i][4], CONFLICTING))
    for i in pos_only:
        other = [b for b in "ACGT" if b not in (r_[i][3], r_[i][4])]
        entries.append((r_[i][0], r_[i][1], r_[i][3], str(rng.choice(other)), plp()))
    for i in vus:
        entries.append((r_[i][0], r_[i][1], r_[i][3], r_[i][4], "Uncertain_significance"))
    for i in ben:
        entries.append((r_[i][0], r_[i][1], r_[i][3], r_[i][4], ("Benign", "Likely_benign")[int(rng.integers(2))]))
    # the proband's VCF: every carried record in the table plus a drawn share of the others in the window
    frac = float(rng.uniform(0.4, 0.6))
    keep = sorted(used - set(absent) | set(int(i) for i in car if rng.random() < frac))
    name = _opaque_ids(rng, 1)[0]
    rows = []
    for i in keep:
        d = {k: v for k, v in infos[i].items() if k in ("AC", "AN", "AF", *POPS, "VT", "AA")}
        rows.append(r_[i][:7] + [info_str(d), "GT", _gt_str(G[i], rng)])
    data.rows = rows
    data.samples = [name]
    data.header = _g1k_header(False)
    data.tables["clinvar_like.tsv"] = _clinvar_table(rng, entries)
    data.meta = {
        "assay": "low-coverage whole-genome sequencing, 1000 Genomes Phase 1 style calls (GRCh37, chr22:50.3-51.0 Mb); "
                 "INFO carries the 1000 Genomes Phase 1 allele frequencies (global AF and AFR/AMR/ASN/EUR)",
        "task": {"proband": name,
                 "indication": "suspected rare, highly penetrant Mendelian disorder (prevalence < 1 in 10,000)"},
        "clinvar_like.tsv": "variant-level clinical significance table (ClinVar variant_summary style): variation_id, "
                            "chrom, pos, ref, alt, clinical_significance, review_status",
        "allele_frequency_tags": "a population allele-frequency tag absent from a record means the allele was not "
                                 "observed in that population",
    }
    return data


# ---------------------------------------------------------------- L3 dossier (SNV spectrum)

TRANSITIONS = {("A", "G"), ("G", "A"), ("C", "T"), ("T", "C")}


def spectrum_tables(data: VcfData) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per sample: SNV genotypes (het, hom-alt), Ti/Tv, het/hom ratio, singletons (non-ref in this sample only);
    per sample x substitution class (C>A, C>G, C>T, T>A, T>C, T>G, strand-collapsed): non-ref genotype counts."""
    cls_of = {}
    for a, b in [("C", "A"), ("C", "G"), ("C", "T"), ("T", "A"), ("T", "C"), ("T", "G")]:
        comp = {"A": "T", "C": "G", "G": "C", "T": "A"}
        cls_of[(a, b)] = f"{a}>{b}"
        cls_of[(comp[a], comp[b])] = f"{a}>{b}"
    per, spec = [], []
    n = len(data.samples)
    G = []
    snv_rows = [r for r in data.rows if len(r[3]) == 1 and len(r[4]) == 1 and r[3] in "ACGT" and r[4] in "ACGT"]
    for r in snv_rows:
        G.append([sum(a != "0" for a in gt_of(r, i).replace("|", "/").split("/")) for i in range(n)])
    G = np.array(G)
    classes = np.array([cls_of[(r[3], r[4])] for r in snv_rows])
    ti = np.array([(r[3], r[4]) in TRANSITIONS for r in snv_rows])
    carriers = (G > 0).sum(1)
    for i, s in enumerate(data.samples):
        nz = G[:, i] > 0
        het, hom = int((G[:, i] == 1).sum()), int((G[:, i] == 2).sum())
        per.append({"sample": s, "snv_genotypes": int(nz.sum()), "het": het, "hom_alt": hom,
                    "het_hom_ratio": round(het / max(hom, 1), 3), "transitions": int((nz & ti).sum()),
                    "transversions": int((nz & ~ti).sum()), "ti_tv": round((nz & ti).sum() / max((nz & ~ti).sum(), 1), 3),
                    "singletons": int((nz & (carriers == 1)).sum()),
                    "singleton_ti_tv": round((nz & ti & (carriers == 1)).sum() / max((nz & ~ti & (carriers == 1)).sum(), 1), 3)})
        for c in sorted(set(cls_of.values())):
            m = nz & (classes == c)
            spec.append({"sample": s, "substitution": c, "genotypes": int(m.sum()),
                         "singletons": int((m & (carriers == 1)).sum()),
                         "fraction_of_snvs": round(m.sum() / max(nz.sum(), 1), 4)})
    return pd.DataFrame(per), pd.DataFrame(spec)


@recipe(TRACK, "tstv_dossier")
def tstv_dossier(data: VcfData, rng, artifact_rate: float = 0.0) -> VcfData:
    """Dossier of the five real GBR samples' SNV spectra. artifact_rate > 0 (injected counterfactual): in one drawn
    sample, a fraction `artifact_rate` of its hom-ref genotypes at real C>A / G>T records (REF C or G, ALT A or T on
    the same strand class) become heterozygous - the signature of oxidative 8-oxoG damage during library preparation
    (Costello et al. 2013). Every other genotype is the real data; tables are recomputed from the edited genotypes."""
    names = _opaque_ids(rng, 5)
    if artifact_rate > 0:
        s = int(rng.integers(5))
        for r in data.rows:
            if (r[3], r[4]) in (("C", "A"), ("G", "T")) and gt_of(r, s).replace("|", "/") == "0/0" \
                    and rng.random() < artifact_rate:
                parts = r[9 + s].split(":")
                parts[0] = "0/1"
                r[9 + s] = ":".join(parts)
    data.samples = names
    per, spec = spectrum_tables(data)
    per = per.sort_values("sample").reset_index(drop=True)                  # canonical order: by sample name
    spec = spec.sort_values(["sample", "substitution"]).reset_index(drop=True)
    n_snv = sum(1 for r in data.rows if len(r[3]) == 1 and len(r[4]) == 1)
    md = [
        "# Evidence dossier: germline SNV spectra of five sequenced individuals",
        "",
        "## Data",
        f"Genotypes of five individuals of British ancestry at {n_snv:,} biallelic SNV sites in a 700-kb window of",
        "chromosome 22 (GRCh37 chr22:50.30-51.00 Mb), from population-scale low-coverage whole-genome sequencing",
        "(1000 Genomes Phase 1 style calls: the sites were discovered in the whole project, the genotypes are these",
        "five people's). Samples carry opaque IDs.",
        "",
        "## Reference analysis",
        "For each individual: the number of SNV sites where it carries a non-reference genotype (het, hom_alt),",
        "the transition/transversion ratio (Ti/Tv: A<->G and C<->T changes over the rest), the het/hom ratio, and",
        "singletons (non-reference genotypes that no other of the five individuals carries) with their Ti/Tv",
        "(`sample_summary.csv`). `substitution_spectrum.csv` splits each individual's non-reference genotypes into",
        "the six strand-collapsed substitution classes (C>A also counts G>T, etc.).",
        "",
        "## Tables",
        "- sample_summary.csv: sample, snv_genotypes, het, hom_alt, het_hom_ratio, transitions, transversions, ti_tv,",
        "  singletons, singleton_ti_tv",
        "- substitution_spectrum.csv: sample, substitution, genotypes, singletons, fraction_of_snvs",
    ]
    data.dossier = {"dossier.md": "\n".join(md), "sample_summary.csv": per, "substitution_spectrum.csv": spec}
    return data


MENDEL_CLASSES = ("PASS, high quality", "PASS, low quality", "PASS, indel", "VQSR-filtered")


def mendel_tables(data: VcfData) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per declared trio, over the biallelic records where every trio member is called and one carries the ALT
    (informative sites): Mendelian-inconsistent sites (the child's genotype cannot be formed from one allele of each
    parent), overall and per call class: VQSR-filtered (FILTER not PASS); PASS indel; PASS SNV with some trio call of
    GQ < 20 or DP < 10 (low quality); the other PASS SNVs (high quality)."""
    opts = {0: [0], 1: [0, 1], 2: [1]}
    summ, by = [], []
    for child, parents in TRIOS:
        idx = [data.samples.index(x) for x in (child, *parents)]
        counts = {c: [0, 0] for c in MENDEL_CLASSES}
        for r in data.rows:
            if "," in r[4]:
                continue
            g = [_dos(r, i) for i in idx]
            if None in g or max(g) == 0:
                continue
            bad = not any(a + b == g[0] for a in opts[g[1]] for b in opts[g[2]])
            q = [_genotype_fields(r, i) for i in idx]
            try:
                low = min(int(d.get("GQ", "0")) for d in q) < 20 or min(int(d.get("DP", "0")) for d in q) < 10
            except ValueError:
                low = True
            cls = ("VQSR-filtered" if r[6] != "PASS" else "PASS, indel" if (len(r[3]) != 1 or len(r[4]) != 1)
                   else "PASS, low quality" if low else "PASS, high quality")
            counts[cls][0] += 1
            counts[cls][1] += bad
        n, e = sum(v[0] for v in counts.values()), sum(v[1] for v in counts.values())
        summ.append({"child": child, "parents": "+".join(parents), "population": POPULATION[child],
                     "informative_sites": n, "inconsistent_sites": e, "inconsistent_percent": round(100 * e / n, 2)})
        for c in MENDEL_CLASSES:
            k, b = counts[c]
            by.append({"child": child, "call_class": c, "informative_sites": k, "inconsistent_sites": b,
                       "inconsistent_percent": round(100 * b / k, 2) if k else 0.0})
    return (pd.DataFrame(summ).sort_values("child").reset_index(drop=True),
            pd.DataFrame(by).sort_values(["child", "call_class"]).reset_index(drop=True))


@recipe(TRACK, "mendel_dossier")
def mendel_dossier(data: VcfData, rng) -> VcfData:
    """Native dossier (real data, untouched): Mendelian consistency of the four real HapMap/CEPH trios of the GATK exome
    call set of chromosome 22, overall and per call class (mendel_tables)."""
    summ, by = mendel_tables(data)
    md = [
        "# Evidence dossier: Mendelian consistency of four parent-child trios",
        "",
        "## Data",
        "Whole-exome sequencing of 22 HapMap/CEPH individuals, jointly genotyped with GATK HaplotypeCaller and filtered",
        f"with VQSR (FILTER column), GRCh37 chromosome 22 ({len(data.rows):,} variant records). The call set contains",
        "four complete parent-child trios with documented parentage (CEPH pedigrees 1463 and 1341, a CEPH/Utah",
        "trio and the Yoruba trio Y117); the trios are named by the child's Coriell ID.",
        "",
        "## Reference analysis",
        "For each trio, at every biallelic record where all three members have a genotype call and at least one",
        "carries the ALT allele (informative site): whether the child's genotype can be formed from one allele of each",
        "parent. Sites where it cannot are Mendelian-inconsistent (`mendel_summary.csv`). `mendel_by_call_class.csv`",
        "splits the same sites by call class: VQSR-filtered (FILTER not PASS); PASS indel; PASS SNV where some trio",
        "member's call has GQ < 20 or DP < 10 ('PASS, low quality'); all other PASS SNVs ('PASS, high quality').",
        "",
        "## Tables",
        "- mendel_summary.csv: child, parents, population, informative_sites, inconsistent_sites, inconsistent_percent",
        "- mendel_by_call_class.csv: child, call_class, informative_sites, inconsistent_sites, inconsistent_percent",
    ]
    data.dossier = {"dossier.md": "\n".join(md), "mendel_summary.csv": summ, "mendel_by_call_class.csv": by}
    return data


# ---------------------------------------------------------------- writer

def canonical_columns(data: VcfData) -> VcfData:
    """The one layout rule of every clinvar VCF (issue 18): sample columns sorted by name, each column keeping its
    genotypes, in clean and defective worlds alike. A sample swap relabels genotype columns, then the labels are
    sorted like any other world's, so neither the header order nor the position of a name tells which were swapped."""
    order = sorted(range(len(data.samples)), key=lambda i: data.samples[i])
    if order == list(range(len(data.samples))):
        return data
    out = copy.copy(data)
    out.samples = [data.samples[i] for i in order]
    out.rows = [r[:9] + [r[9 + i] for i in order] for r in data.rows]
    return out


def vcf_text(data: VcfData) -> str:
    cols = ["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *data.samples]
    lines = data.header + ["\t".join(cols)] + ["\t".join(r) for r in data.rows]
    return "\n".join(lines) + "\n"


def bgzf_bytes(text: bytes, block: int = 0xff00) -> bytes:
    """BGZF (bgzip) bytes: deflate blocks of <= 65,280 bytes with the BC extra field, then the EOF block. Written
    here (zlib level 6, mtime 0, OS 255) so the bytes do not depend on the htslib build."""
    out = io.BytesIO()
    for i in range(0, len(text), block):
        chunk = text[i:i + block]
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        comp = c.compress(chunk) + c.flush()
        bsize = len(comp) + 25
        out.write(b"\x1f\x8b\x08\x04" + b"\x00\x00\x00\x00" + b"\x00\xff" + b"\x06\x00" + b"BC\x02\x00"
                  + (bsize).to_bytes(2, "little") + comp + (zlib.crc32(chunk) & 0xffffffff).to_bytes(4, "little")
                  + len(chunk).to_bytes(4, "little"))
    out.write(BGZF_EOF)
    return out.getvalue()


@writer(TRACK)
def write(data: VcfData, w: CanonicalWriter) -> None:
    if data.dossier is not None:
        w.files(data.dossier)
        return
    raw = bgzf_bytes(vcf_text(canonical_columns(data)).encode("utf-8"))
    if data.truncate_at is not None:
        # cut at the BGZF block boundary nearest below `truncate_at` x the length: the stream loses its tail blocks and
        # the EOF marker (the last kept block ends mid-record, as block boundaries ignore line ends)
        starts, pos = [], 0
        while pos < len(raw) - len(BGZF_EOF):
            starts.append(pos)
            pos += int.from_bytes(raw[pos + 16:pos + 18], "little") + 1
        cut = max([s for s in starts if s <= len(raw) * data.truncate_at] or [starts[1]])
        raw = raw[:max(cut, starts[1])]
    _atomic_write(w.path(VCF), raw)
    if data.truth:
        w.truth(**data.truth)
    for name, df in sorted(data.tables.items()):
        w.table(name, df)
    meta = dict(data.meta)
    if data.declared_records is not None:
        meta["n_records"] = data.declared_records
    files = {VCF: "bgzip-compressed VCF (no index shipped)", "meta.json": "this description"}
    for name in data.tables:
        files[name] = meta.pop(name, "table")
    meta["files"] = files
    w.json("meta.json", meta)
