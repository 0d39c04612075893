"""A bad manifest fails with one clear error naming file, YAML line, field and reason (SPEC R2)."""
import textwrap
from pathlib import Path

import pytest
import yaml

from benchmark.errors import ManifestError
from benchmark.suite.loader import Suite
from tests.helpers import L2_SCHEMA

TRACK = dict(name="histone", title="t", description="d", module="worlds.histone.build", solver_module="worlds.histone.solvers",
             tools=["macs3"], substrate=dict(name="x", seed=1, real=False, source="sim"))
FAMILY = dict(id="histone.L2.quantify", track="histone", level="L2", title="t", prompt="p", report_schema=L2_SCHEMA,
              solver="histone.L2.quantify")
WORLD = textwrap.dedent("""\
    id: histone.L2.quantify.clean
    track: histone
    level: L2
    family: histone.L2.quantify
    class: clean
    title: clean control
    seed: 3
    public_files: [meta.json]
    expected_response: e
    careful_scientist: c
    grounding: {citation: x, rationale: y}
    rubric:
      checks:
        - {id: a, kind: value, component: A, field: total_mb, golden: total_mb, rel_tol: 0.35}
        - {id: i, kind: equals, component: I, field: analysis_usable, values: [true]}
        - {id: m, kind: present, component: M, field: peak_mode}
        - {id: c, kind: present, component: C, field: issues_found}
    """)


def make_root(tmp_path: Path, world_text: str = WORLD, name: str = "clean") -> Path:
    fam_dir = tmp_path / "histone" / "L2" / "quantify"
    fam_dir.mkdir(parents=True)
    (tmp_path / "histone" / "track.yaml").write_text(yaml.safe_dump(TRACK))
    (fam_dir / "family.yaml").write_text(yaml.safe_dump(FAMILY))
    (fam_dir / f"{name}.yaml").write_text(world_text)
    return tmp_path


def test_good_manifest_loads(tmp_path):
    s = Suite(make_root(tmp_path))
    ref = s.worlds["histone.L2.quantify.clean"]
    assert ref.world.world_class == "clean" and ref.family.id == "histone.L2.quantify"


@pytest.mark.parametrize("old,new,field,line,reason", [
    ("class: clean", "class: challenge", "class", 5, "not a L2 class"),
    ("seed: 3", "seed: three", "seed", 7, "integer"),
    ("title: clean control\n", "", "title", None, "required but missing"),
    ("seed: 3", "seed: 3\ncolour: red", "colour", 8, "not a known field"),
    ("rel_tol: 0.35", "rel_tol: 0.35, bogus: 1", "rubric.checks.0.bogus", 14, "not a known field"),
    ("    - {id: c, kind: present, component: C, field: issues_found}\n", "", "rubric", 12, "none for C"),
    ("class: clean", "class: confound", "trap", None, "names its trap"),
    ("class: clean", "class: confound\ntrap: null", "trap", 6, "names its trap"),
])
def test_bad_manifest_names_file_field_line(tmp_path, old, new, field, line, reason):
    root = make_root(tmp_path, WORLD.replace(old, new))
    with pytest.raises(ManifestError) as ei:
        Suite(root)
    e = ei.value
    assert e.path.endswith("clean.yaml") and e.field == field and reason in e.reason, str(e)
    if line:
        assert e.line == line, str(e)
    assert str(e).startswith(str(root)), "message names the file first"


def test_world_id_must_match_its_path(tmp_path):
    with pytest.raises(ManifestError, match="file name"):
        Suite(make_root(tmp_path, WORLD, name="renamed"))


def test_invalid_yaml_reports_line(tmp_path):
    with pytest.raises(ManifestError) as ei:
        Suite(make_root(tmp_path, WORLD.replace("seed: 3", "seed: [3")))
    assert ei.value.field == "<yaml>" and ei.value.line is not None


def test_bad_report_schema_in_family(tmp_path):
    root = make_root(tmp_path)
    fam = dict(FAMILY, report_schema={"type": "objekt"})
    (root / "histone/L2/quantify/family.yaml").write_text(yaml.safe_dump(fam))
    with pytest.raises(ManifestError, match="report_schema"):
        Suite(root)


def test_report_schema_memo_remembers_a_pass_never_a_failure(tmp_path, monkeypatch):
    """The metaschema check is memoised by the schema's hash (0.3 CPU-s of every CLI process): a schema that passed
    is not checked again, an edited one is, and a bad one fails on every load."""
    from graders import manifest

    memo = tmp_path / "memo"
    monkeypatch.setattr(manifest, "SCHEMA_OK_DIR", memo)
    bad = {"type": "objekt"}
    for _ in range(2):
        with pytest.raises(ValueError, match="not a valid JSON Schema"):
            manifest.check_report_schema(bad)
    assert not memo.exists() or not any(memo.iterdir())
    manifest.check_report_schema(L2_SCHEMA)
    assert len(list(memo.iterdir())) == 1
    manifest.check_report_schema(dict(L2_SCHEMA))  # the same schema: remembered, no new entry
    assert len(list(memo.iterdir())) == 1
    manifest.check_report_schema(dict(L2_SCHEMA, title="edited"))
    assert len(list(memo.iterdir())) == 2


def test_lock_hash_ignores_only_the_pivotal_block(tmp_path):
    """Editing a world's pivotal case must not force a re-freeze; any other edit must."""
    from benchmark.suite.freeze import manifest_sha256

    base = "id: t.L1.x.y\nrubric:\n  expect: accept\n# note\n"
    p = tmp_path / "w.yaml"
    p.write_text(base)
    h = manifest_sha256(p)
    p.write_text(base + "pivotal:\n  categories: [a]\n  record: 'x {g[k]}'\n\n  original_plan: o\n")
    assert manifest_sha256(p) == h
    p.write_text("pivotal:\n  record: r\n" + base)
    assert manifest_sha256(p) == h
    p.write_text(base.replace("accept", "detect") + "pivotal:\n  record: r\n")
    assert manifest_sha256(p) != h
    # a list of decisions, whose items YAML lets start at column 0, is the pivotal block too
    p.write_text("pivotal:\n- record: r\n  original_plan: o\n- stage: later\n  record: s\n" + base)
    assert manifest_sha256(p) == h
    p.write_text(base + "pivotal:\n- record: r\n- stage: later\n  record: s\nextra: 1\n")
    assert manifest_sha256(p) != h


def test_every_declared_data_file_is_fetched_and_matches_its_hash():
    """Setup fetched what each track.yaml `data:` entry declares; the bytes are the ones the worlds were frozen from."""
    import hashlib

    from benchmark.suite.package_data import declared_sources, package_file

    srcs = declared_sources()
    assert {t.parent.name for t, _ in srcs} >= {"crispr", "clinvar", "bulkrna"}
    for tpath, src in srcs:
        p = package_file(src.folder, src.name)
        assert hashlib.sha256(p.read_bytes()).hexdigest() == src.sha256, (tpath, src.name)


def test_a_bad_data_entry_names_the_file_and_field(tmp_path):
    from benchmark.errors import BenchmarkError
    from benchmark.suite.package_data import declared_sources

    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "track.yaml").write_text("data:\n- registry: conda\n  package: x\n")
    with pytest.raises(BenchmarkError, match=r"track.yaml: field 'data.0'"):
        declared_sources(tmp_path)


def test_a_loaded_suite_is_reused_from_its_bytes_and_an_edit_or_a_broken_file_is_never_served_stale(tmp_path, monkeypatch):
    """cached_suite keeps a suite that loaded (pickled under .cache/suites/) and serves it again only for the same
    bytes: an edited world is read afresh, a broken one raises every time, a torn cache file is loaded afresh."""
    from benchmark.suite import loader

    monkeypatch.setattr(loader, "SUITE_CACHE_DIR", tmp_path / "cache")
    root = make_root(tmp_path / "suite")
    first = loader.cached_suite(root)
    kept = list((tmp_path / "cache").glob("*.pickle"))
    assert len(kept) == 1
    monkeypatch.setattr(loader.Suite, "_load", lambda self: pytest.fail("parsed again for unchanged bytes"))
    again = loader.cached_suite(root)
    assert again is not first and again.worlds.keys() == first.worlds.keys()
    assert again.worlds["histone.L2.quantify.clean"].world == first.worlds["histone.L2.quantify.clean"].world
    monkeypatch.undo()
    monkeypatch.setattr(loader, "SUITE_CACHE_DIR", tmp_path / "cache")

    world = root / "histone" / "L2" / "quantify" / "clean.yaml"
    world.write_text(WORLD.replace("title: clean control", "title: edited control"))
    assert loader.cached_suite(root).worlds["histone.L2.quantify.clean"].world.title == "edited control"
    world.write_text(WORLD.replace("seed: 3", "seed: three"))
    for _ in range(2):
        with pytest.raises(ManifestError, match="seed"):
            loader.cached_suite(root)
    world.write_text(WORLD)
    for p in (tmp_path / "cache").glob("*.pickle"):
        p.write_bytes(b"torn")
    assert loader.cached_suite(root).worlds["histone.L2.quantify.clean"].world.title == "clean control"
