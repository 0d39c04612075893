"""Issue 38 item 3: every product form an L1 prompt allows is graded as allowed.

Every L1 prompt offers two forms for an action's output: "a list of the affected items, one per line; or a corrected
copy of the affected data file". The hand-written correct reports use the list; here each L1 trap world whose
golden items name rows of one of its files gets the other form too: a corrected copy of that file, with the affected
rows removed (the simplest correction every prompt admits), named `<file>_corrected.<ext>`, in place of the list. It
must grade exactly as the list does (100). Worlds whose items are not rows of a file (samples as columns, files,
rows missing from the data) have no row-level copy and are named as skipped by the selection test below.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchmark.suite.freeze import ensure_built, read_golden
from benchmark.suite.handwritten import report_path, write_products
from benchmark.suite.loader import Suite
from graders.checks import KEY_FORMS, _fields, _key_form, _norm, changed_records
from graders.grade import grade
from graders.manifest import L1World

SUITE = Suite()


def _list_action(ref) -> tuple[str, str] | None:
    """The correct report's listed product (its file name) and the golden list a `product_items` action matches it
    with, if any (a `product` validator that wants a corrected file is that file's own form)."""
    doc = yaml.safe_load(report_path(ref).read_text())
    listed = {c.golden for c in ref.world.rubric.actions if c.kind == "product_items"}
    for name, spec in (doc.get("products_golden") or {}).items():
        if isinstance(spec, dict) and spec.get("golden") in listed:
            for issue in doc["correct"].get("issues", []):
                if issue.get("output") == name:
                    return name, spec["golden"]
    return None


def _rows_file(world_dir: Path, items: list[str]) -> tuple[Path, str] | None:
    """The world text file whose rows the golden items name (every item found under one key form), and that form."""
    known = {_norm(str(x)) for x in items}
    for p in sorted(world_dir.rglob("*")):
        if not p.is_file() or p.suffix not in (".csv", ".tsv", ".txt", ".vcf"):
            continue
        lines = [x for x in p.read_text(errors="replace").splitlines() if x.strip() and not x.startswith("#")]
        form = _key_form(lines, known)
        found = {_norm(KEY_FORMS[form](x, _fields(x))) for x in lines} & known
        if found == known:
            return p, form
    return None


def _cases() -> list:
    out = []
    for ref in sorted(SUITE.select(levels=["L1"]), key=lambda r: r.id):
        if not isinstance(ref.world, L1World) or ref.world.defect is None or not report_path(ref).exists():
            continue
        if _list_action(ref) is not None:
            out.append(ref)
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def copies():
    """ref.id -> (the world's folder, the file the items name, its key form) for every case that has a row copy."""
    out = {}
    for ref in CASES:
        name, key = _list_action(ref)
        items = [str(x) for x in read_golden(ref).values[key]]
        d = ensure_built(ref)
        hit = _rows_file(d, items)
        if hit is not None:
            out[ref.id] = (d, *hit)
    return out


def test_every_track_has_worlds_with_a_row_copy(copies):
    """The form is exercised on most tracks: a selection that silently found no copy would test nothing."""
    tracks = {SUITE.worlds[w].world.track for w in copies}
    assert len(copies) >= 25 and len(tracks) >= 7, (sorted(tracks), len(copies))


@pytest.mark.parametrize("ref", CASES, ids=lambda r: r.id)
def test_a_corrected_copy_grades_as_the_list_does(ref, copies, tmp_path):
    if ref.id not in copies:
        pytest.skip("the golden items are not rows of one world file (samples, files or rows the data lack)")
    world_dir, original, form = copies[ref.id]
    name, key = _list_action(ref)
    golden = read_golden(ref).values
    doc = yaml.safe_load(report_path(ref).read_text())
    products = write_products(doc, golden, tmp_path / "products", world_dir if doc.get("products_world") else None)
    listed = grade(ref, golden, doc["correct"], products=products, inputs=world_dir)
    assert listed.score == pytest.approx(100.0), listed.reason

    known = {_norm(str(x)) for x in golden[key]}
    text = original.read_text(errors="replace")
    kept = [x for x in text.splitlines() if not (x.strip() and not x.startswith("#")
                                                 and _norm(KEY_FORMS[form](x, _fields(x))) in known)]
    copy_name = f"{original.name.split('.')[0]}_corrected.{original.name.split('.', 1)[1]}"
    (products / copy_name).write_text("\n".join(kept) + "\n")
    assert sorted(map(_norm, changed_records(original, products / copy_name, golden[key]))) == sorted(known)

    report = yaml.safe_load(yaml.safe_dump(doc["correct"]))
    for issue in report["issues"]:
        if issue.get("output") == name:
            issue["output"] = copy_name
    copied = grade(ref, golden, report, products=products, inputs=world_dir)
    assert copied.score == pytest.approx(listed.score), copied.reason

    if original.suffix in (".csv", ".tsv") and not text.startswith("#"):
        # the same copy as an analyst's pandas writes it: every unchanged float reprinted (0.470 as 0.47), missing
        # values as empty fields; the rows it leaves as they were are still unchanged (a blind analyst's pandas copy
        # of a kJ/mol table read as 541 changed rows, F1 0.54)
        import pandas as pd

        sep = "\t" if original.suffix == ".tsv" else ","
        table = pd.read_csv(original, sep=sep, dtype={0: str}, keep_default_na=True)
        first = table.columns[0]
        keys = table.apply(lambda r: _norm(KEY_FORMS[form](sep.join(map(str, r.values)), [str(v) for v in r.values])),
                           axis=1)
        table[~keys.isin(known)].to_csv(products / copy_name, sep=sep, index=False)
        assert first == text.splitlines()[0].split(sep)[0]
        reprinted = grade(ref, golden, report, products=products, inputs=world_dir)
        assert reprinted.score == pytest.approx(listed.score), reprinted.reason


def test_a_renamed_bam_is_an_allowed_form_of_the_contig_naming_fix(tmp_path):
    """histone chrom_naming: the standard fix is `samtools reheader` of the BAM to the annotation's names, a BGZF
    file. Its validator reads BAMs, so it must accept BGZF (a blind analyst's reheadered BAM was refused as "the family
    asks for plain text"); a BAM still on the old names is not the fix."""
    import subprocess

    import pysam

    ref = SUITE.worlds["histone.L1.integrity.chrom_naming"]
    world = ensure_built(ref)
    doc = yaml.safe_load(report_path(ref).read_text())
    golden = read_golden(ref).values
    chip = world / "alignments" / "H3K4me3_chip.bam"
    with pysam.AlignmentFile(str(chip), "rb") as bam:
        header = bam.header.to_dict()
    for sq in header["SQ"]:
        sq["SN"] = sq["SN"] if sq["SN"].startswith("chr") or not sq["SN"][:1].isdigit() else "chr" + sq["SN"]
    (tmp_path / "h.sam").write_text(str(pysam.AlignmentHeader.from_dict(header)))
    products = tmp_path / "products"
    (products / "fixed").mkdir(parents=True)
    with open(products / "fixed" / "chip.bam", "wb") as out:
        subprocess.run(["samtools", "reheader", str(tmp_path / "h.sam"), str(chip)], stdout=out, check=True)
    (products / "fixed" / "same.bam").write_bytes(chip.read_bytes())
    issue = {**doc["correct"]["issues"][0], "output": "fixed/chip.bam"}
    g = grade(ref, golden, {**doc["correct"], "issues": [issue]}, products=products, inputs=world)
    assert g.score == pytest.approx(100.0), g.reason
    g = grade(ref, golden, {**doc["correct"], "issues": [{**issue, "output": "fixed/same.bam"}]}, products=products,
              inputs=world)
    assert g.score < 100.0, g.reason


def test_a_copy_corrected_in_place_and_reprinted_by_pandas_names_only_the_rows_it_fixed(tmp_path):
    """A kJ/mol table converted in place with pandas: every unchanged float is reprinted (0.470 as 0.47), and only the
    converted rows hold new values. The copy names those rows, so it grades as the list does (a blind analyst's copy
    read as 541 changed rows, F1 0.54, and DIAGNOSE-NOT-ACT)."""
    import pandas as pd

    ref = SUITE.worlds["protein.L1.integrity.kj_units"]
    golden = read_golden(ref).values
    world_dir = ensure_built(ref)
    doc = yaml.safe_load(report_path(ref).read_text())
    name, key = _list_action(ref)
    products = write_products(doc, golden, tmp_path / "products", None)
    table = pd.read_csv(world_dir / "stability.csv")
    assert table.to_csv(index=False) != (world_dir / "stability.csv").read_text(), "pandas reprints the floats"
    wrong = table["variant"].isin(golden[key])
    for col in ("dG_wt", "dG_mut", "ddG"):
        table.loc[wrong, col] = table.loc[wrong, col] / 4.184
    table.to_csv(products / "stability_corrected.csv", index=False)
    report = yaml.safe_load(yaml.safe_dump(doc["correct"]))
    for issue in report["issues"]:
        if issue.get("output") == name:
            issue["output"] = "stability_corrected.csv"
    result = grade(ref, golden, report, products=products, inputs=world_dir)
    assert result.score == pytest.approx(100.0), result.reason
    assert sorted(changed_records(world_dir / "stability.csv", products / "stability_corrected.csv", golden[key])) == \
        sorted(golden[key])
