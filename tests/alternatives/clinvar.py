"""clinvar: sound analyses other than the reference solver's (bcftools and pysam instead of the solver's own VCF
parser; a Whiffin filtering allele frequency instead of raw popmax; GQ >= 30 instead of GQ >= 20 and DP >= 10; BA1 on
the global AF of a population of >= 2,000 alleles instead of popmax). None reads the golden: each works from the
world's public files (calls.vcf.gz, clinvar_like.tsv, meta.json) as an expert with another tool would.
"""
from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

from tests.alternatives import alternative

POPS = ("AFR_AF", "AMR_AF", "ASN_AF", "EUR_AF")
PLP = {"Pathogenic", "Likely_pathogenic", "Pathogenic/Likely_pathogenic"}


def _sh(*args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, check=True).stdout


def _population_prefix(vcf: Path) -> str:
    """Read the header: which INFO tags hold the 1000 Genomes frequencies ('' or 'KG_')."""
    header = _sh("bcftools", "view", "-h", str(vcf))
    for line in header.splitlines():
        if line.startswith("##INFO=<ID=KG_AF,") and "1000 Genomes" in line:
            return "KG_"
    return ""


def _write_lines(path: Path, items) -> None:
    path.write_text("".join(f"{x}\n" for x in items))


def _freq_report(world_dir: Path, out: Path, faf: dict, glob: dict, prefix: str, T: float, pb: str, how: str) -> dict:
    rare = [k for k, f in faf.items() if f < T]
    with open(out / "af_table.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["variant", "filter_af", "rare"])
        for k, f in faf.items():
            w.writerow([k, round(f, 4), int(f < T)])
    _write_lines(out / "candidates.txt", rare)
    issues = []
    if prefix:
        issues.append("INFO/AF is the allele frequency of this 5-sample call set (AN = 10); the 1000 Genomes "
                      "frequencies are in the KG_ tags, which were used instead")
    admitted = [k for k in faf if glob[k] < T <= faf[k]]
    if admitted:
        issues.append(f"{len(admitted)} variants are rare globally but common in a continental population "
                      f"(ancestry-specific frequencies); filtered on the maximum population AF")
    return {"proband": pb, "candidate_list": "candidates.txt", "af_table": "af_table.csv", "n_candidates": len(rare),
            "af_source": how, "issues_found": issues, "analysis_usable": True,
            "summary": f"{len(rare)} of the proband's {len(faf)} variants pass the frequency screen."}


@alternative("clinvar.L2.frequency_filter", "bcftools query, popmax over the 1000 Genomes tags read from the header",
             ["clinvar.L2.frequency_filter.clean", "clinvar.L2.frequency_filter.african_ancestry",
              "clinvar.L2.frequency_filter.east_asian_ancestry", "clinvar.L2.frequency_filter.cohort_af"])
def bcftools_popmax(world_dir: Path, out: Path) -> dict:
    """bcftools query of the proband's genotype and every 1000 Genomes frequency tag (float32 as bcftools prints it);
    popmax = the largest of the global and continental AFs, an absent tag = 0."""
    meta = json.loads((world_dir / "meta.json").read_text())
    pb, T = meta["task"]["proband"], float(meta["task"]["max_allele_frequency"])
    vcf = world_dir / "calls.vcf.gz"
    pre = _population_prefix(vcf)
    tags = [pre + "AF", *(pre + p for p in POPS)]
    fmt = "%CHROM:%POS:%REF:%ALT\t" + "\t".join(f"%INFO/{t}" for t in tags) + "[\t%GT]\n"
    faf, glob = {}, {}
    for line in _sh("bcftools", "query", "-s", pb, "-f", fmt, str(vcf)).splitlines():
        f = line.split("\t")
        if not any(a not in ("0", ".") for a in f[-1].replace("|", "/").split("/")):
            continue
        vals = [float(x) if x not in (".", "") else 0.0 for x in f[1:-1]]
        faf[f[0]], glob[f[0]] = max(vals), vals[0]
    return _freq_report(world_dir, out, faf, glob, pre, T, pb,
                        f"popmax of {', '.join(tags)} (bcftools query)")


# 1000 Genomes Phase 1 allele numbers: 1,092 people; AFR 246, AMR 181, ASN 286, EUR 379
PHASE1_AN = {"AF": 2184, "AFR_AF": 492, "AMR_AF": 362, "ASN_AF": 572, "EUR_AF": 758}


def _faf95(af: float, an: int) -> float:
    from scipy.stats import chi2

    ac = round(af * an)
    return chi2.ppf(0.05, 2 * ac) / 2 / an if ac > 0 else 0.0


@alternative("clinvar.L2.frequency_filter",
             "pysam, Whiffin et al. 2017 filtering allele frequency (faf95, Phase 1 allele numbers)",
             ["clinvar.L2.frequency_filter.clean", "clinvar.L2.frequency_filter.african_ancestry",
              "clinvar.L2.frequency_filter.east_asian_ancestry", "clinvar.L2.frequency_filter.cohort_af"])
def pysam_faf(world_dir: Path, out: Path) -> dict:
    """pysam (float32 INFO values): for every population the lower bound of the one-sided 95% Poisson interval of its
    allele count (Whiffin et al. 2017), the filtering AF = the largest; the variant passes when it is below the cut-off."""
    import pysam

    meta = json.loads((world_dir / "meta.json").read_text())
    pb, T = meta["task"]["proband"], float(meta["task"]["max_allele_frequency"])
    vf = pysam.VariantFile(str(world_dir / "calls.vcf.gz"))
    pre = "KG_" if "KG_AF" in vf.header.info and "1000 Genomes" in (vf.header.info["KG_AF"].description or "") else ""
    faf, glob = {}, {}

    def val(rec, tag):
        x = rec.info.get(pre + tag)
        if isinstance(x, tuple):
            x = x[0]
        return float(x) if x is not None else 0.0

    for rec in vf:
        gt = rec.samples[pb]["GT"]
        if not gt or not any(a for a in gt if a is not None):
            continue
        k = f"{rec.chrom}:{rec.pos}:{rec.ref}:{','.join(rec.alts)}"
        faf[k] = max(_faf95(val(rec, t), an) for t, an in PHASE1_AN.items())
        glob[k] = val(rec, "AF")
    return _freq_report(world_dir, out, faf, glob, pre, T, pb,
                        "filtering allele frequency (faf95) over the 1000 Genomes global and continental frequencies")


@alternative("clinvar.L2.carrier_screen", "bcftools norm -m-any, then carriers with GQ >= 30 (bcftools query)",
             ["clinvar.L2.carrier_screen.clean", "clinvar.L2.carrier_screen.chr_prefix",
              "clinvar.L2.carrier_screen.multiallelic_unsplit", "clinvar.L2.carrier_screen.low_quality_calls"])
def bcftools_carriers(world_dir: Path, out: Path) -> dict:
    """Split multi-allelic records with bcftools norm, query GT:GQ:DP, count a call as a carrier when it carries the
    ALT and GQ >= 30 (a stricter standard filter than the reference's GQ >= 20 and DP >= 10); contigs compared
    without a 'chr' prefix on both sides."""
    vcf = world_dir / "calls.vcf.gz"
    split = out / "split.vcf"
    _sh("bcftools", "norm", "-m", "-any", "-Ov", "-o", str(split), str(vcf))
    n_multi = sum("," in ln.split("\t")[4] for ln in _sh("bcftools", "view", "-H", str(vcf)).splitlines())
    calls, vcf_contigs = {}, set()
    for line in _sh("bcftools", "query", "-f", "%CHROM\t%POS\t%REF\t%ALT[\t%GT:%GQ:%DP]\n", str(split)).splitlines():
        f = line.split("\t")
        vcf_contigs.add(f[0])
        calls[(f[0].removeprefix("chr"), int(f[1]), f[2], f[3])] = f[4:]
    rows, excluded, table_contigs = [], 0, set()
    with open(world_dir / "clinvar_like.tsv") as fh:
        for e in csv.DictReader(fh, delimiter="\t"):
            table_contigs.add(e["chrom"])
            if e["clinical_significance"] not in PLP:
                continue
            n = 0
            for c in calls.get((e["chrom"].removeprefix("chr"), int(e["pos"]), e["ref"], e["alt"]), []):
                gt, gq, dp = c.split(":")
                if "1" not in gt.replace("|", "/").split("/"):
                    continue
                if gq not in (".", "") and int(gq) >= 30:
                    n += 1
                else:
                    excluded += 1
            rows.append((f"{e['chrom']}:{e['pos']}:{e['ref']}:{e['alt']}", n))
    with open(out / "carriers.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["variant", "n_carriers"])
        w.writerows(rows)
    _write_lines(out / "carried_plp.txt", [k for k, n in rows if n > 0])
    issues = []
    if n_multi:
        issues.append(f"{n_multi} multi-allelic records: split with bcftools norm -m-any before matching alleles")
    if table_contigs != vcf_contigs:
        issues.append(f"contig naming differs (table {sorted(table_contigs)}, VCF {sorted(vcf_contigs)}): 'chr' prefix "
                      f"removed on both sides")
    if excluded:
        issues.append(f"{excluded} carrier calls with low genotype quality (GQ < 30) not counted")
    total = sum(n for _, n in rows)
    return {"carrier_table": "carriers.csv", "carrier_list": "carried_plp.txt", "n_carrier_genotypes": total,
            "genotype_filter": "bcftools norm -m-any; carrier = ALT in GT and GQ >= 30; contigs compared without 'chr'",
            "issues_found": issues, "analysis_usable": True, "summary": f"{total} confident carrier genotypes."}


@alternative("clinvar.L2.reportable_findings",
             "pysam exact-allele match, aggregate P/LP only, BA1 on the global AF (>= 2,000 alleles, ClinGen SVI)",
             ["clinvar.L2.reportable_findings.clean", "clinvar.L2.reportable_findings.allele_mismatch",
              "clinvar.L2.reportable_findings.common_pathogenic", "clinvar.L2.reportable_findings.conflicting"])
def pysam_findings(world_dir: Path, out: Path) -> dict:
    """pysam: the proband's dosage of each table entry's exact allele; report entries whose aggregate significance is
    P/LP (a conflicting aggregate is not) unless BA1 applies: AF > 5% in a population of >= 2,000 alleles (Ghosh et al.
    2018), here the 1000 Genomes global AF (2,184 alleles; the continental panels are smaller)."""
    import pysam

    meta = json.loads((world_dir / "meta.json").read_text())
    pb = meta["task"]["proband"]
    vf = pysam.VariantFile(str(world_dir / "calls.vcf.gz"))
    dosage, glob = {}, {}
    for rec in vf:
        gt = rec.samples[pb]["GT"] or ()
        for i, alt in enumerate(rec.alts or (), start=1):
            k = (rec.chrom.removeprefix("chr"), rec.pos, rec.ref, alt)
            dosage[k] = sum(a == i for a in gt if a is not None)
            af = rec.info.get("AF")
            glob[k] = float(af[i - 1] if isinstance(af, tuple) else af) if af is not None else 0.0
    rows, found, conflicting, common, other_allele = [], [], 0, 0, 0
    positions = {k[:2] for k, g in dosage.items() if g > 0}
    with open(world_dir / "clinvar_like.tsv") as fh:
        for e in csv.DictReader(fh, delimiter="\t"):
            k = (e["chrom"].removeprefix("chr"), int(e["pos"]), e["ref"], e["alt"])
            name = f"{e['chrom']}:{e['pos']}:{e['ref']}:{e['alt']}"
            g = dosage.get(k, 0)
            rows.append((name, g))
            sig = e["clinical_significance"]
            if g and sig.startswith("Conflicting"):
                conflicting += 1
            if not g and k[:2] in positions and sig in PLP:
                other_allele += 1
            if g and sig in PLP:
                if glob[k] > 0.05:
                    common += 1
                else:
                    found.append(name)
    with open(out / "evidence.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["variant", "proband_dosage"])
        w.writerows(rows)
    _write_lines(out / "findings.txt", found)
    issues = []
    if conflicting:
        issues.append(f"{conflicting} carried entries have conflicting interpretations: not reported as pathogenic")
    if common:
        issues.append(f"{common} carried P/LP entries are too common (BA1: global AF > 5%) for a rare penetrant disorder")
    if other_allele:
        issues.append(f"{other_allele} P/LP entries share a position with a proband variant but name a different ALT "
                      f"allele: matched on the exact allele")
    return {"proband": pb, "findings_list": "findings.txt", "evidence_table": "evidence.csv", "n_findings": len(found),
            "issues_found": issues, "analysis_usable": True, "summary": f"{len(found)} reportable findings."}


@alternative("clinvar.L2.inheritance",
             "bcftools query of the trio's GT/AD/DP/GQ, phase by transmission, reliable parental calls at GQ >= 30 and DP >= 8",
             ["clinvar.L2.inheritance.clean", "clinvar.L2.inheritance.single_het_recessive",
              "clinvar.L2.inheritance.cis_compound_het", "clinvar.L2.inheritance.parental_dropout"])
def bcftools_transmission(world_dir: Path, out: Path) -> dict:
    """bcftools query of the three family members' GT:AD:DP:GQ at every record; each proband het is assigned to the
    parent who carries the allele when the other parent's hom-ref call is reliable (GQ >= 30 and DP >= 8, a different
    standard cut-off from the reference's GQ >= 20 and DP >= 10); de novo = both parents hom-ref on reliable calls with
    no ALT read. A gene's copies hit: 2 for a homozygous variant or hets from both parents, else 1 if any het."""
    meta = json.loads((world_dir / "meta.json").read_text())
    pb, parents = meta["family"]["proband"], meta["family"]["parents"]
    vcf = world_dir / "calls.vcf.gz"
    order = _sh("bcftools", "query", "-l", str(vcf)).split()
    calls = {}
    for line in _sh("bcftools", "query", "-f", "%CHROM:%POS:%REF:%ALT[\t%GT:%AD:%DP:%GQ]\n", str(vcf)).splitlines():
        f = line.split("\t")
        calls[f[0]] = dict(zip(order, f[1:]))

    def parse(c):
        gt, ad, dp, gq = c.split(":")
        al = gt.replace("|", "/").split("/")
        dose = sum(a not in ("0", ".") for a in al)
        alt_reads = int(ad.split(",")[1]) if ad not in (".", "") and len(ad.split(",")) > 1 else 0
        reliable = gq not in (".", "") and dp not in (".", "") and int(gq) >= 30 and int(dp) >= 8
        return dose, alt_reads, reliable

    genes, modes = {}, {}
    with open(world_dir / "candidates.tsv") as fh:
        for e in csv.DictReader(fh, delimiter="\t"):
            genes.setdefault(e["gene"], []).append(f"{e['chrom']}:{e['pos']}:{e['ref']}:{e['alt']}")
            modes[e["gene"]] = e["inheritance_mode"]
    copies, explained, n_dn, singles, cis, dropouts = {}, [], 0, 0, 0, 0
    for g, keys in sorted(genes.items()):
        sources, hom, hets, dn = set(), False, 0, False
        for k in keys:
            c = calls.get(k)
            if c is None:
                continue
            d = parse(c[pb])
            if d[0] == 0:
                continue
            if d[0] == 2:
                hom = True
                continue
            hets += 1
            p = [parse(c[x]) for x in parents]
            if all(x[0] == 0 and x[1] == 0 and x[2] for x in p):
                dn, n_dn = True, n_dn + 1
                sources.add("de novo")
            elif all(x[0] == 0 for x in p):
                dropouts += 1
            elif p[0][0] > 0 and p[1][0] == 0 and p[1][2]:
                sources.add(parents[0])
            elif p[1][0] > 0 and p[0][0] == 0 and p[0][2]:
                sources.add(parents[1])
        n = 2 if hom or set(parents) <= sources else (1 if hom or hets else 0)
        copies[g] = n
        if modes[g] == "AR" and hets == 1 and not hom:
            singles += 1
        if modes[g] == "AR" and hets >= 2 and n < 2:
            cis += 1
        if (modes[g] == "AR" and n == 2) or (modes[g] == "AD" and dn):
            explained.append(g)
    with open(out / "gene_table.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["gene", "copies_hit"])
        w.writerows(sorted(copies.items()))
    _write_lines(out / "explained_genes.txt", explained)
    issues = []
    if singles:
        issues.append(f"{singles} AR genes carry a single heterozygous variant (carrier): not explanatory without a "
                      f"second hit")
    if cis:
        issues.append(f"{cis} AR genes have two hets inherited from the same parent (in cis): not compound heterozygous")
    if dropouts:
        issues.append(f"{dropouts} apparent de novo variants rest on a parental hom-ref call with low depth or GQ "
                      f"(possible dropout): not called de novo")
    return {"gene_table": "gene_table.csv", "explained_list": "explained_genes.txt", "n_explained": len(explained),
            "n_de_novo": n_dn, "method": "bcftools query; phase by transmission; reliable parental call GQ >= 30, DP >= 8",
            "issues_found": issues, "analysis_usable": True,
            "summary": f"{len(explained)} genes fit their inheritance mode; {n_dn} de novo variant(s)."}


# ---------------------------------------------------------------- L1 integrity: reference build and sample identity

def _l1_report(issue: dict | None) -> dict:
    return {"assessment": "usable_with_caveats" if issue else "usable", "issues": [issue] if issue else [],
            "summary": "build and relatedness checks with bcftools" + ("; problem found" if issue else "; all pass")}


@alternative("clinvar.L1.integrity", "bcftools view -h contig lengths against bcftools query max POS; bcftools reheader --fai (b37)",
             ["clinvar.L1.integrity.build_mismatch", "clinvar.L1.integrity.clean"])
def bcftools_build_check(world_dir: Path, out: Path) -> dict:
    vcf = world_dir / "calls.vcf.gz"
    lengths = {}
    for line in _sh("bcftools", "view", "-h", str(vcf)).splitlines():
        if line.startswith("##contig=<"):
            kv = dict(x.split("=", 1) for x in line[10:].rstrip(">").split(",") if "=" in x)
            if kv.get("length", "").isdigit():
                lengths[kv["ID"]] = int(kv["length"])
    pos = [line.split("\t") for line in _sh("bcftools", "query", "-f", "%CHROM\t%POS\n", str(vcf)).splitlines()]
    beyond = sum(1 for c, p in pos if c in lengths and int(p) > lengths[c])
    if not beyond:
        return _l1_report(None)
    fai = out / "b37.fai"
    fai.write_text("22\t51304566\t0\t0\t0\n")
    tmp, fixed = out / "reheadered.vcf.gz", out / "calls.b37.vcf"
    subprocess.run(["bcftools", "reheader", "--fai", str(fai), "-o", str(tmp), str(vcf)], check=True)
    subprocess.run(["bcftools", "view", "-Ov", "-o", str(fixed), str(tmp)], check=True)
    tmp.unlink()
    return _l1_report({"category": "genome build mismatch", "severity": "blocking", "where": "calls.vcf.gz header",
                       "description": f"{beyond} records lie past the declared end of chromosome 22 (GRCh38 length in "
                                      "the header); the positions are GRCh37", "value": beyond,
                       "action": "reheadered with the b37 chromosome 22 length", "output": fixed.name})


def _dosages(vcf: Path) -> tuple[list, list]:
    samples = _sh("bcftools", "query", "-l", str(vcf)).split()
    rows = []
    for line in _sh("bcftools", "query", "-i", 'N_ALT=1', "-f", "[%GT\t]\n", str(vcf)).splitlines():
        g = []
        for gt in line.rstrip("\t").split("\t"):
            al = gt.replace("|", "/").split("/")
            g.append(-1 if "." in al else sum(a != "0" for a in al))
        rows.append(g)
    return samples, rows


@alternative("clinvar.L1.integrity", "bcftools gtcheck -e 0 pairwise discordance (concordance over all co-called sites)",
             ["clinvar.L1.integrity.duplicate_individual", "clinvar.L1.integrity.clean"])
def gtcheck_duplicates(world_dir: Path, out: Path) -> dict:
    vcf = world_dir / "calls.vcf.gz"
    best = []
    for line in _sh("bcftools", "gtcheck", "-e", "0", str(vcf)).splitlines():
        f = line.split("\t")
        if f[0] in ("DC", "DCv2") and int(f[5]) > 0:
            best.append((1 - int(f[3]) / int(f[5]), f[1], f[2]))
    dup = [b for b in best if b[0] >= 0.95]
    if not dup:
        return _l1_report(None)
    conc, a, b = max(dup)
    _write_lines(out / "dups.txt", sorted([a, b]))
    return _l1_report({"category": "same individual under two IDs", "severity": "blocking", "where": f"samples {a}, {b}",
                       "description": f"bcftools gtcheck: genotype concordance {conc:.3f} between {a} and {b}",
                       "value": round(conc, 4), "action": "keep one of the two", "output": "dups.txt"})


@alternative("clinvar.L1.integrity", "plink --genome style method-of-moments IBD (PI_HAT), cohort allele frequencies",
             ["clinvar.L1.integrity.duplicate_individual", "clinvar.L1.integrity.clean"])
def pihat_duplicates(world_dir: Path, out: Path) -> dict:
    import numpy as np

    samples, rows = _dosages(world_dir / "calls.vcf.gz")
    G = np.array(rows)
    called = G >= 0
    p = np.where(called, G, 0).sum(1) / np.maximum(2 * called.sum(1), 1)
    hits = []
    for i in range(len(samples)):
        for j in range(i + 1, len(samples)):
            ok = called[:, i] & called[:, j] & (p > 0) & (p < 1)
            q = p[ok]
            ibs = 2 - np.abs(G[ok, i] - G[ok, j])
            e0 = (2 * q**2 * (1 - q) ** 2).mean()                      # E[IBS0 | IBD0]
            e1_0 = (4 * q**3 * (1 - q) + 4 * q * (1 - q) ** 3).mean()   # E[IBS1 | IBD0]
            e1_1 = (2 * q * (1 - q)).mean()                           # E[IBS1 | IBD1]
            z0 = (ibs == 0).mean() / e0
            z1 = ((ibs == 1).mean() - z0 * e1_0) / e1_1
            pihat = z1 / 2 + (1 - z0 - z1)
            hits.append((float(pihat), samples[i], samples[j]))
    pihat, a, b = max(hits)
    if pihat < 0.8:
        return _l1_report(None)
    _write_lines(out / "dups.txt", sorted([a, b]))
    return _l1_report({"category": "duplicate sample", "severity": "blocking", "where": f"samples {a}, {b}",
                       "description": f"PI_HAT {pihat:.3f} (duplicates / MZ twins ~1; parent-child ~0.5)",
                       "value": round(min(pihat, 1.0), 4), "action": "keep one of the two", "output": "dups.txt"})
