"""clinvar track: a seeded edit must not stand out from the pipeline's own records by anything but what it means.

An analyst who saw only the data (issue 38's blind-analyst study) refused the seeded de novo of
clinvar.L2.inheritance.clean because its parent's hom-ref call was the only one of 835 whose posteriors (PP) skipped
the record's population prior (INFO PG): a tell of a planted edit, not a property of the family the world teaches."""
from __future__ import annotations

import gzip

import pytest

from benchmark.suite.freeze import ensure_built
from benchmark.suite.loader import load_suite

SUITE = load_suite()
INHERITANCE = sorted(w for w in SUITE.worlds if w.startswith("clinvar.L2.inheritance."))


def _posterior_misfits(vcf) -> list[str]:
    """Calls whose PP is not PL + PG less its minimum (GATK CalculateGenotypePosteriors, within its rounding of 1)."""
    out = []
    with gzip.open(vcf, "rt") as fh:
        for line in fh:
            if line.startswith("#"):
                continue
            f = line.rstrip("\n").split("\t")
            info = dict(kv.split("=", 1) for kv in f[7].split(";") if "=" in kv)
            if "PG" not in info or "," in f[4]:
                continue
            pg = [int(x) for x in info["PG"].split(",")]
            keys = f[8].split(":")
            for sample in f[9:]:
                v = dict(zip(keys, sample.split(":")))
                if v.get("PL", ".") in (".", "") or v.get("PP", ".") in (".", ""):
                    continue
                pl = [int(x) for x in v["PL"].split(",")]
                pp = [int(x) for x in v["PP"].split(",")]
                want = [a + b for a, b in zip(pl, pg)]
                want = [x - min(want) for x in want]
                if max(abs(a - b) for a, b in zip(want, pp)) > 1:
                    out.append(f"{f[0]}:{f[1]} PL={v['PL']} PG={info['PG']} PP={v['PP']}")
    return out


@pytest.mark.parametrize("wid", INHERITANCE)
def test_inheritance_edits_carry_the_pipelines_posteriors(wid):
    misfits = _posterior_misfits(ensure_built(SUITE.worlds[wid]) / "calls.vcf.gz")
    assert not misfits, f"{wid}: calls whose posteriors skip the prior (a tell of an edit): {misfits[:5]}"


def test_contamination_is_measured_by_its_fraction_against_the_drawn_alpha():
    """Blind study 20: an analyst who named the contaminated sample, its contaminant (NA10847, right) and a mixture
    model's fraction (16.5%, the drawn alpha is 17.8%) and excluded the sample scored 83.3 "no measured value in
    tolerance": the rubric measured only the sample count and the share of hom-ref calls with ALT reads. The fraction
    itself (VerifyBamID's FREEMIX) is the defect's standard size; it is now graded against the recipe's alpha. A third
    or twice the alpha does not pass (half of it is about the hom-ref share, the other measure, and passes as that)."""
    from benchmark.suite.freeze import read_golden
    from graders.grade import grade

    ref = load_suite().worlds["clinvar.L1.integrity.sample_contamination"]
    golden = read_golden(ref).values
    alpha = golden["truth"]["contamination_fraction"]
    assert 0.1 <= alpha <= 0.2 and golden["truth"]["contaminant"] != golden["contaminated_samples"][0]

    def report(value):
        return {"assessment": "usable_with_caveats", "summary": "one sample is contaminated", "issues": [
            {"category": "sample contamination (cross-sample DNA mixture)", "severity": "blocking",
             "where": f"sample {golden['contaminated_samples'][0]}",
             "description": f"A binomial mixture fit of its allele depths gives a contamination fraction of {value:.3f}.",
             "value": value, "action": "excluded the sample", "output": None}]}

    scores = {v: grade(ref, golden, report(v)).reason for v in (round(alpha * 0.93, 3), alpha / 3, alpha * 2)}
    assert [("no measured value" not in r) for r in scores.values()] == [True, False, False], scores


def test_trans_compound_heterozygotes_phased_by_the_trio_are_a_truth(tmp_path):
    """Blind study 26 (clinvar inheritance, clean world, 75): "Two AR genes carry two heterozygous variants each, and
    the trio resolves their phase ... Both pairs are in trans, so these are compound heterozygotes" was charged as the
    cis trap. The family declares the trans compound heterozygotes (`trans_ar_genes`) as a nuisance feature: an entry
    that phases them in trans, in several wordings, scores 100; the same genes said to be in cis, or a phasing claim
    naming other genes, still costs recognition."""
    import yaml

    from benchmark.suite.freeze import read_golden
    from benchmark.suite.handwritten import report_path, write_products
    from graders.grade import grade

    ref = SUITE.worlds["clinvar.L2.inheritance.clean"]
    doc = yaml.safe_load(report_path(ref).read_text())
    golden = read_golden(ref).values
    products = write_products(doc, golden, tmp_path / "products", ensure_built(ref) if doc.get("products_world") else None)
    a, b = golden["trans_ar_genes"]

    def score(text):
        entry = {"issue": text, "changes_result": True, "value": 2}
        return grade(ref, golden, {**doc["correct"], "issues_found": [entry]}, products=products).score

    for text in (f"Two AR genes carry two hets each, and the trio resolves their phase: at {a} and {b} one variant "
                 "comes from each parent, so both pairs are in trans (compound heterozygotes, copies_hit 2).",
                 f"Phasing with the parents: {a} and {b} each have one het inherited from each parent, so both are "
                 "biallelic.",
                 f"{a} and {b}: the two hets of each were inherited from different parents (compound heterozygous)."):
        assert score(text) == pytest.approx(100.0), text
    assert score(f"{a} and {b}: both hets of each come from the same parent (in cis), not a true compound het.") < 100
    assert score("Phasing two AR genes with the trio puts their hets in trans (CG0001, CG0002).") < 100


def test_a_recount_that_also_trims_uncarried_alleles_is_a_corrected_copy(tmp_path):
    """Blind study 26 (clinvar stale_info_counts, 66.7): the analyst recounted AC/AN/AF and, as the standard route for
    a call set subset from a larger one does, trimmed the ALT alleles no delivered sample carries and dropped the 36
    records left with none (`bcftools view --trim-alt-alleles -c 1`); the recount check wanted every record kept. Both
    forms are corrected copies, run here with bcftools itself; trimming without recounting, or dropping records that
    are carried, is not."""
    import subprocess

    from benchmark.suite.freeze import read_golden
    from worlds.clinvar.solvers import recounted

    ref = SUITE.worlds["clinvar.L1.integrity.stale_info_counts"]
    golden = read_golden(ref).values
    src = ensure_built(ref) / "calls.vcf.gz"

    def sh(cmd: str, name: str):
        out = tmp_path / name
        subprocess.run(f"{cmd} -Oz -o {out}", shell=True, check=True, capture_output=True)
        return recounted(out, golden, None)[0]

    fill = f"bcftools +fill-tags {src} -- -t AC,AN,AF"
    assert sh(f"{fill} | bcftools view", "kept.vcf.gz") == 1.0
    assert sh(f"{fill} | bcftools view --trim-alt-alleles -c1 | bcftools +fill-tags", "trimmed.vcf.gz") == 1.0
    assert sh(f"bcftools view --trim-alt-alleles {src} | bcftools view", "stale.vcf.gz") == 0.0
    assert sh(f"{fill} | bcftools view -c2 | bcftools +fill-tags", "dropped.vcf.gz") == 0.0
    assert len(golden["uncarried_trim"]) >= 30  # the trimmed form is recorded in the golden


def test_carrier_total_allows_an_allele_balance_filter_and_single_hits_are_named_with_their_adjectives():
    """Blind study 28: (carrier_screen multiallelic_unsplit, 87.5) an allele-balance filter on het calls dropped one
    borderline carrier call (11 of 59 reads ALT) and the exact total check failed: within 2 it passes, the unsplit
    trap's total (16 of 43) does not. (inheritance single_het_recessive, 87.5) "CG3954 (AR) has only one paternally
    inherited hit" named the trap with two words between "one" and "hit": the patterns allow two; "none of the hets"
    is not "one ... het"."""
    from benchmark.suite.freeze import read_golden
    from graders.checks import run_check

    ref = SUITE.worlds["clinvar.L2.carrier_screen.multiallelic_unsplit"]
    g = read_golden(ref).values
    total = next(c for c in ref.world.rubric.checks if c.id == "total")
    n = g["n_carrier_genotypes"]
    assert [run_check(total, {total.field: x}, g).credit for x in (n - 1, n - 2, n - 3)] == [1.0, 1.0, 0.0]
    assert run_check(total, {total.field: g["n_naive_carrier_genotypes"]}, g).credit == 0.0

    ref = SUITE.worlds["clinvar.L2.inheritance.single_het_recessive"]
    g = read_golden(ref).values
    named = next(c for c in ref.world.rubric.checks if c.id == "named")
    for text in ("CG3954, CG0596 and CG4326 (AR) have only one paternally inherited hit each.",
                 "Recessive genes with a single maternal variant do not fit their mode.",
                 "AR gene CG4326: one het only, so not explained."):
        assert run_check(named, {"issues_found": [text]}, g).credit == 1.0, text
    assert run_check(named, {"issues_found": ["AR genes: none of the hets is de novo."]}, g).credit == 0.0
