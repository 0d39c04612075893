"""Evidence grounding (seed 000, SPEC R13): items, verified versions, refusal at build time, canonical determinism,
scripted oracle/recall runs, EGA and the evaluator stress test."""
from __future__ import annotations

import gzip
import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from benchmark.errors import BenchmarkError
from benchmark.grounding import build as B
from benchmark.grounding.items import VERSIONS, Item, load_items, select
from benchmark.grounding.metrics import agent_metrics, evaluator_stress, grader_stress, leaderboard_rows, \
    render_leaderboard_md, summarise
from benchmark.grounding.run import GroundingConfig, GroundingRecord, execute, render_prompt, shown_options
from graders import grounding as gold

ITEMS = load_items().items


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def built():
    return {r["item"]: r for r in B.ensure_built(ITEMS)}


def test_no_option_position_answers_a_tracks_items():
    """A rule that always picks one letter (the first option, say) must not answer a track's items: in every track
    no letter is the key, or the flip's answer, of more than half of the items. (Five tracks once listed the key
    first in every item, so `answer A` scored 100% accuracy on them without the data.)"""
    by_track: dict[str, list[Item]] = {}
    for i in ITEMS:
        by_track.setdefault(i.track, []).append(i)
    for track, items in sorted(by_track.items()):
        for what, letters in (("key", [i.key for i in items]), ("flip answer", [i.flip_answer for i in items])):
            letter, n = Counter(letters).most_common(1)[0]
            assert n <= len(items) / 2, f"{track}: {letter} is the {what} of {n} of {len(items)} items"


def test_item_set():
    scrna = [i for i in ITEMS if i.track == "scrna"]
    assert len(scrna) >= 20
    fams = Counter(i.family for i in scrna)
    assert set(fams) == {"marker", "abundance", "composition", "localisation", "de"} and min(fams.values()) >= 4
    for i in ITEMS:
        assert i.question and i.background and len(i.options) == 4 and i.key in i.options
        assert i.flip_answer != i.key and i.statistic["kind"] and "margin" in i.statistic
        assert i.family in i.host.families and load_items().paths[i.track].parent.name == i.track
    ops = {i.flip["op"] for i in scrna} | {i.withdrawal["op"] for i in scrna}
    assert {"swap_genes", "move_expression", "downsample", "delete_gene", "remove_group", "remove_population",
            "equalise"} <= ops
    crispr = [i for i in ITEMS if i.track == "crispr"]
    assert len(crispr) >= 8 and all(i.id.startswith("crispr_") for i in crispr)
    assert set(Counter(i.family for i in crispr)) == {"depletion", "selectivity", "guide_consistency", "screen_strength"}
    assert {"swap_genes", "exchange_samples", "delete_gene", "drop_sample"} <= (
        {i.flip["op"] for i in crispr} | {i.withdrawal["op"] for i in crispr})
    clinvar = [i for i in ITEMS if i.track == "clinvar"]
    assert len(clinvar) >= 8 and all(i.id.startswith("clinvar_") for i in clinvar)
    assert set(Counter(i.family for i in clinvar)) == {"trio", "relatedness", "ancestry", "diversity"}
    assert {"exchange_samples", "duplicate_sample", "swap_info_tags", "drop_sample", "mask_sample",
            "remove_info_tag"} <= ({i.flip["op"] for i in clinvar} | {i.withdrawal["op"] for i in clinvar})
    bulkrna = [i for i in ITEMS if i.track == "bulkrna"]
    assert len(bulkrna) >= 8 and all(i.id.startswith("bulkrna_") for i in bulkrna)
    assert set(Counter(i.family for i in bulkrna)) == {"tissue_specificity", "abundance", "lane_identity",
                                                       "detection_breadth"}
    assert {"swap_genes", "exchange_lanes", "delete_gene", "drop_lanes", "drop_tissue"} <= (
        {i.flip["op"] for i in bulkrna} | {i.withdrawal["op"] for i in bulkrna})


def test_every_shipped_version_verifies_from_disk(built):
    """Recompute the reference statistic from the files on disk for every version of every item."""
    for item in ITEMS:
        rec = built[item.id]
        assert rec["fingerprint"] == B.fingerprint(item)
        original = B.base_data(item)
        for cls in VERSIONS:
            root = B.version_dir(item.id, cls)
            for f, sha in rec["versions"][cls]["files"].items():
                assert _sha(root / f) == sha, f"{item.id}/{cls}/{f} changed after the build"
            # the statistic must give the class's answer; a deleted gene appears in no file; no original barcode
            # survives the null version (the scRNA host's verify_extra)
            problems = B.verify(item, cls, root, original)
            assert problems == [], f"{item.id}/{cls}: {problems}"
            assert gold.statistic(item.host.stat_source, item.statistic, item.options, root)["answer"] == item.supported(cls)


def test_withdrawal_and_null_edits_reach_every_file(built):
    item = select(["marker_b_cell"])[0]
    for f in B.version_dir(item.id, "withdrawal").rglob("*"):
        if f.is_file():
            raw = f.read_bytes()
            assert b"CD79A" not in (gzip.decompress(raw) if f.name.endswith(".gz") else raw), f
    bcs = {c: {ln.split(",")[0] for ln in (B.version_dir(item.id, c) / "cells.csv").read_text().splitlines()[1:]}
           for c in ("null", "original")}
    assert len(bcs["null"]) == len(bcs["original"]) == 700 and not bcs["null"] & bcs["original"]


def _broken(**changes) -> Item:
    d = select(["marker_b_cell"])[0].model_dump()
    d.update(id="broken_item", **changes)
    return Item.model_validate(d)


def test_a_failing_flip_is_refused_at_build_time(tmp_path):
    bad = _broken(flip={"op": "swap_genes", "a": "CD3D", "b": "LYZ", "answer": "D"})  # does not touch the key
    with pytest.raises(B.BuildRefused) as exc:
        B.build_item(bad, cache_root=tmp_path)
    msg = str(exc.value)
    assert "broken_item" in msg and "version flip refused" in msg and "supports C" in msg and "requires D" in msg
    assert not (tmp_path / "named" / "broken_item").exists()  # nothing half-built is installed


def test_an_unsupported_key_and_a_leaky_withdrawal_are_refused(tmp_path):
    with pytest.raises(B.BuildRefused, match=r"broken_item, version original refused.*requires A"):
        B.build_item(_broken(key="A", flip={"op": "swap_genes", "a": "CD79A", "b": "NKG7", "answer": "D"}),
                     cache_root=tmp_path)
    with pytest.raises(B.BuildRefused, match=r"version withdrawal refused.*requires undefined"):
        B.build_item(_broken(withdrawal={"op": "delete_gene", "gene": "CD3E"}), cache_root=tmp_path)  # not an option gene


def test_build_is_deterministic_and_canonical(tmp_path):
    item = select(["composition_up_b"])[0]
    a = B.build_item(item, cache_root=tmp_path / "a")
    b = B.build_item(item, cache_root=tmp_path / "b")
    assert a == b
    for cls in VERSIONS:
        for f in a["versions"][cls]["files"]:
            p = tmp_path / "a" / "named" / item.id / cls / f
            if f.endswith(".gz"):
                raw = p.read_bytes()
                assert int.from_bytes(raw[4:8], "little") == 0 and raw[10:].startswith(Path(f).name[:-3].encode())
    assert not list((tmp_path / "a").rglob("*.h5ad"))


def test_anonymised_versions_verify_and_hide_names(tmp_path):
    item = select(["local_lyz"])[0]
    rec = B.build_item(item, anon=True, cache_root=tmp_path)
    assert {c: v["supported"] for c, v in rec["versions"].items()} == {"original": "B", "null": "B", "withdrawal": None, "flip": "C"}
    shown = B.agent_item(item, True)
    assert "LYZ" not in shown.question and shown.statistic["gene"].startswith("G")
    feats = gzip.decompress((tmp_path / "anon" / item.id / "original" / "filtered_feature_bc_matrix" / "features.tsv.gz").read_bytes())
    assert b"LYZ" not in feats and b"CD79A" not in feats
    assert shown.options == item.options  # population options keep names without gene symbols


def test_prompt_identical_across_versions_and_nodata_gives_question_only():
    item = ITEMS[0]
    opts, letter = shown_options(item, False)
    assert letter is None
    p = render_prompt(item, opts, nodata=False)
    nd = render_prompt(item, opts, nodata=True)
    assert item.question in nd and item.background in nd and "matrix.mtx" not in nd
    opts2, letter2 = shown_options(item, True)
    assert letter2 == "E" and "insufficient" in opts2["E"] and "E) The provided data" in render_prompt(item, opts2, False)
    assert p == render_prompt(item, opts, nodata=False)


def per_statistic_sample(items: list[Item]) -> list[Item]:
    """The first item of each track's each statistic kind (29 of the 99 items today), marker_b_cell among them:
    every reference statistic's code runs in the sandbox on all five versions. That each item's statistic gives its
    version's answer on the shipped files is `test_every_shipped_version_verifies_from_disk`, for every item, with the
    same code in this process (`grounding run --model scripted/oracle` does it for every item through the sandbox)."""
    first: dict[tuple[str, str], Item] = {}
    for i in items:
        first.setdefault((i.track, str(i.statistic.get("kind"))), i)
    return list(first.values())


SAMPLE = per_statistic_sample(ITEMS)
SAMPLE_IDS = [i.id for i in SAMPLE]


@pytest.fixture(scope="module")
def scripted_runs(tmp_path_factory, built):
    root = tmp_path_factory.mktemp("grounding_runs")
    out = {}
    for model in ("scripted/oracle", "scripted/recall"):
        d = root / model.replace("/", "_")
        execute(GroundingConfig(model=model, out=d, concurrency=2, items=SAMPLE_IDS))
        out[model] = d
    from benchmark.grounding.judge import judge_run

    for d in out.values():
        judge_run(d, "scripted/oracle")
    return out


def test_oracle_reaches_full_ega_and_recall_full_accuracy_zero_ega(scripted_runs):
    s = summarise(list(scripted_runs.values()), bootstrap=200)
    oracle, recall = ({r["model"]: r for r in s["runs"]}[m]["metrics"] for m in ("scripted/oracle", "scripted/recall"))
    assert oracle["accuracy"]["value"] == 1.0 and oracle["EGA"]["value"] == 1.0 and oracle["EGA_strict"]["value"] == 1.0
    assert oracle["R_flip"]["value"] == 1.0 and oracle["R_rm_flag"]["value"] == 1.0 and oracle["I_null"]["value"] == 1.0
    assert oracle["derived"]["value"] == 1.0
    assert recall["accuracy"]["value"] == 1.0 and recall["EGA"]["value"] == 0.0 and recall["R_flip"]["value"] == 0.0
    assert recall["recalled"]["value"] == 1.0 and recall["accuracy_nodata"]["value"] == 1.0
    assert recall["evidence_gain"]["value"] == 0.0 and oracle["evidence_gain"]["value"] > 0.5
    ev = s["evaluators"]
    assert ev["key_match"]["AUC_flip"] <= 0.1 and ev["key_match"]["S_null"] == 0.0
    assert ev["key_match"]["B_flip"] == 0.5  # the recall runs keep the key after the flip and are fully credited
    assert ev["judge scripted/oracle [standard]"]["AUC_flip"] <= 0.1
    assert ev["judge scripted/oracle [grounding]"]["AUC_flip"] >= 0.9
    assert ev["judge scripted/oracle [grounding]"]["AUC_flip"] > ev["key_match"]["AUC_flip"]


def test_run_records_are_complete_and_resumable(scripted_runs):
    d = scripted_runs["scripted/oracle"]
    recs = [GroundingRecord.model_validate_json(x) for x in (d / "grounding.jsonl").read_text().splitlines()]
    assert "marker_b_cell" in SAMPLE_IDS and {i.track for i in SAMPLE} == {i.track for i in ITEMS}
    assert len(recs) == len(SAMPLE) * 5 and all(r.status == "graded" for r in recs)
    assert all(r.confidence is not None and r.data_support and r.evidence for r in recs)
    assert json.loads((d / "config.json").read_text())["model"] == "scripted/oracle"
    with pytest.raises(BenchmarkError, match="--resume"):
        execute(GroundingConfig(model="scripted/oracle", out=d))
    again = execute(GroundingConfig(model="scripted/oracle", out=d, resume=True, items=SAMPLE_IDS))
    assert len(again) == len(recs) and len((d / "grounding.jsonl").read_text().splitlines()) == len(recs)
    first = {r.condition: r for r in recs if r.item == "marker_b_cell"}
    msgs = {c: json.loads((d / first[c].trajectory).read_text())["messages"][1]["content"] for c in first}
    assert msgs["original"] == msgs["null"] == msgs["withdrawal"] == msgs["flip"] != msgs["nodata"]


def test_leaderboard_rows(scripted_runs):
    rows = leaderboard_rows(list(scripted_runs.values()), bootstrap=100)
    md = "\n".join(render_leaderboard_md(rows))
    assert "| scripted/recall | 100.0 [100, 100] | 0.0 [0, 0]" in md
    assert "| scripted/oracle | 100.0 [100, 100] | 100.0 [100, 100]" in md


def test_insufficient_option_and_anonymised_oracle(tmp_path):
    d = tmp_path / "ins"
    recs = execute(GroundingConfig(model="scripted/oracle", out=d, items=["marker_b_cell", "abundance_most_treg"],
                                   conditions=["original", "withdrawal", "flip"], insufficient_option=True))
    by = {(r.item, r.condition): r for r in recs}
    assert by[("marker_b_cell", "withdrawal")].answer == "E" and by[("marker_b_cell", "withdrawal")].abstained
    assert by[("marker_b_cell", "original")].answer == "C" and by[("abundance_most_treg", "flip")].answer == "B"
    recs = execute(GroundingConfig(model="scripted/oracle", out=tmp_path / "anon", items=["de_b_vs_treg"],
                                   conditions=["original", "withdrawal", "flip"], anonymise=True))
    m = agent_metrics(recs, bootstrap=50)["metrics"]
    assert m["EGA"]["value"] == 1.0


def test_metrics_on_hand_made_records():
    def rec(item, cond, ans, flag=False, rep=0, status="graded"):
        return GroundingRecord(key=f"{item}.{cond}__r{rep}", item=item, family="marker", condition=cond, anonymised=False,
                               insufficient_option=False, model="m", replicate=rep, seed=rep, status=status, answer=ans,
                               flag=flag, key_answer="A", flip_answer="B", supported=None, key_match=float(ans == "A"))
    recs = []
    # i1 derived, i2 elimination, i3 rm-only, i4 recalled, i5 wrong on E; a second replicate of i1 that disagrees on E
    for item, (e, rm, fl, flag) in {"i1": ("A", "C", "B", False), "i2": ("A", "A", "B", False),
                                    "i3": ("A", "A", "A", True), "i4": ("A", "A", "A", False),
                                    "i5": ("C", "C", "B", False)}.items():
        recs += [rec(item, "original", e), rec(item, "null", e), rec(item, "withdrawal", rm, flag), rec(item, "flip", fl)]
    recs += [rec("i1", "original", "D", rep=1), rec("i1", "null", "D", rep=1), rec("i1", "withdrawal", "C", rep=1),
             rec("i1", "flip", "B", rep=1)]
    # i6: the withdrawal run died without an answer: not "reacting", so the incomplete replicate is left out
    recs += [rec("i6", "original", "A"), rec("i6", "null", "A"), rec("i6", "withdrawal", None, status="model_error"),
             rec("i6", "flip", "B")]
    out = agent_metrics(recs, bootstrap=100)
    m = out["metrics"]
    assert out["units"] == 6 and out["incomplete_units"] == 1
    assert m["accuracy"]["value"] == pytest.approx(4 / 6)
    routes = sum(m[k]["value"] for k in ("derived", "elimination", "rm_only", "recalled", "other"))
    assert routes == pytest.approx(m["accuracy"]["value"])
    assert m["EGA"]["value"] == m["derived"]["value"] == pytest.approx(1 / 6)  # 2/7 if i6's dead run counted as reacting
    assert m["R_rm"]["value"] == pytest.approx(3 / 6)
    assert m["EGA_strict"]["value"] == 0.0 and m["R_rm_flag"]["value"] == pytest.approx(1 / 6)
    assert m["I_rep"]["value"] == 0.0 and m["I_rep"]["n"] == 1
    lo, hi = m["accuracy"]["ci95"]
    assert 0 <= lo <= m["accuracy"]["value"] <= hi <= 1
    ev = evaluator_stress([({}, recs, [])])["key_match"]
    assert ev["AUC_flip"] == 0.0 and ev["B_flip"] == pytest.approx(2 / 7)


def test_our_graders_separate_paired_reports():
    g = grader_stress()
    assert g["worlds"] >= 30
    assert g["all"]["AUC_flip"] == 1.0 and g["all"]["S_null"] == 0.0 and g["all"]["B_trap"] < 0.5


def test_items_cli_json(capsys, built):
    from benchmark.grounding.cli import main

    assert main(["grounding", "items", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(ITEMS)
    r = next(x for x in rows if x["id"] == "marker_b_cell")
    assert r["key"] == "C" and r["flip_answer"] == "D" and r["versions"]["flip"]["supported"] == "D"
    assert r["versions"]["withdrawal"]["supported"] is None and r["versions"]["original"]["verified"]
    assert any(f.endswith("matrix.mtx.gz") for f in r["versions"]["null"]["files"])
    assert main(["grounding", "run", "--model", "scripted/oracle", "--items", "nope*"]) == 2


def test_leaderboard_grounding_section(tmp_path, scripted_runs):
    from tests.test_leaderboard import _run_board, _runs

    runs, pricing = _runs(tmp_path)
    plain = _run_board(tmp_path, tmp_path / "plain", runs, pricing)
    out = _run_board(tmp_path, tmp_path / "g", runs, pricing, "--grounding", *map(str, scripted_runs.values()))
    md = (out / "leaderboard.md").read_text()
    assert md.startswith((plain / "leaderboard.md").read_text().rstrip("\n"))  # the rest is unchanged
    assert "## Evidence grounding" in md and "| scripted/recall | 100.0 [100, 100] | 0.0 [0, 0]" in md
    assert "## Evidence grounding" not in (plain / "leaderboard.md").read_text()
    data = json.loads((out / "leaderboard.json").read_text())
    assert {r["model"] for r in data["grounding"]} == {"scripted/oracle", "scripted/recall"}
