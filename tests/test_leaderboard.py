"""`leaderboard`: Table 1, per-track tables and figures; identical inputs give identical bytes (SPEC R11)."""
from __future__ import annotations

import argparse
import csv
import json
import textwrap

import pytest

from benchmark.leaderboard import add_leaderboard_parser
from tests.aggregate_helpers import rec, write_run

CARD = """\
date: 2026-01-01
source: test card
currency_per_usd: {CNY: 8.0}
models:
  m/a: {input: 1, output: 2}
  m/b: {input: 8, output: 16, currency: CNY}
  m/x: {input: 1, output: 1}
"""


def _runs(tmp_path):
    a, b, x = [], [], []
    for t in ("gwas", "scrna"):
        for i in range(3):
            a.append(rec(f"{t}.L1.w{i}", t, "L1", [100.0, 100 / 3 * 2, 50.0][i], model="m/a", tokens_in=40_000, tokens_out=2_000, calls=6))
            b.append(rec(f"{t}.L1.w{i}", t, "L1", [50.0, 100.0, 0.0][i], model="m/b", tokens_in=90_000, tokens_out=9_000, calls=9))
            x.append(rec(f"{t}.L1.w{i}", t, "L1", 90.0, model="m/x", tokens_in=1000, status="refused" if i == 2 else "graded"))
        for i, fam in enumerate(("f1", "f1", "f2")):
            a.append(rec(f"{t}.L2.w{i}", t, "L2", [80.0, 60.0, 40.0][i], model="m/a", family=f"{t}.{fam}", tokens_in=50_000, calls=8))
            b.append(rec(f"{t}.L2.w{i}", t, "L2", [30.0, 70.0, 90.0][i], model="m/b", family=f"{t}.{fam}", tokens_in=70_000, calls=7))
            x.append(rec(f"{t}.L2.w{i}", t, "L2", 70.0, model="m/x", family=f"{t}.{fam}", tokens_in=1000))
        a.append(rec(f"{t}.L3.d", t, "L3", 60.0, model="m/a", eligible=True, commitment="commit", axes={"D": 2, "Q": 2, "N": 1}))
        b.append(rec(f"{t}.L3.d", t, "L3", 45.0, model="m/b", eligible=True, commitment="abstain", axes={"D": 2, "Q": 1}))
    a.append(rec("gwas.L3.e", "gwas", "L3", 10.0, model="m/a", eligible=False))
    b.append(rec("gwas.L3.e", "gwas", "L3", 20.0, model="m/b", eligible=False))
    c = [rec("gwas.L1.w0", "gwas", "L1", 100.0, model="m/c")]  # not on the card
    pricing = tmp_path / "pricing"
    pricing.mkdir()
    (pricing / "2026-01-01.yaml").write_text(CARD)
    runs = [write_run(tmp_path / "runs", n, rs, m) for n, rs, m in (("ra", a, "m/a"), ("rb", b, "m/b"), ("rx", x, "m/x"), ("rc", c, "m/c"))]
    return runs, pricing


def _cli(argv):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="verb", required=True)
    add_leaderboard_parser(sub)
    args = p.parse_args(argv)
    return args.fn(args)


def _run_board(tmp_path, out, runs, pricing, *extra):
    argv = ["leaderboard", "--runs", *map(str, runs), "--format", "md", "csv", "json", "--out", str(out),
            "--pricing", str(pricing), "--ledgers", "--fallback", "m/x=m/a", "--bootstrap", "300", "--permutations", "300", *extra]
    assert _cli(argv) == 0
    return out


def test_leaderboard_twice_gives_identical_files_and_pngs(tmp_path, capsys):
    runs, pricing = _runs(tmp_path)
    o1 = _run_board(tmp_path, tmp_path / "o1", runs, pricing)
    o2 = _run_board(tmp_path, tmp_path / "o2", runs, pricing)
    names = sorted(p.name for p in o1.iterdir())
    assert names == ["leaderboard.csv", "leaderboard.json", "leaderboard.md", "leaderboard_tracks.csv",
                     "quality_vs_cost.png", "stage_profile.png", "threshold_curve.png"]
    assert names == sorted(p.name for p in o2.iterdir())
    for n in names:
        assert (o1 / n).read_bytes() == (o2 / n).read_bytes(), n

    from matplotlib.image import imread
    from PIL import Image

    for n in ("stage_profile.png", "quality_vs_cost.png", "threshold_curve.png"):
        assert (o1 / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with Image.open(o1 / n) as im:
            im.verify()
        with Image.open(o1 / n) as im:
            assert im.format == "PNG" and im.size[0] > 300 and im.size[1] > 300
            assert len(set(im.convert("L").getdata())) > 2  # something was drawn
        assert imread(o1 / n).ndim == 3
    assert "Table 1" in capsys.readouterr().out


def test_tables_and_json_carry_the_same_numbers(tmp_path):
    runs, pricing = _runs(tmp_path)
    out = _run_board(tmp_path, tmp_path / "o", runs, pricing)
    data = json.loads((out / "leaderboard.json").read_text())
    md = (out / "leaderboard.md").read_text()
    rows = {r["model"]: r for r in csv.DictReader((out / "leaderboard.csv").open())}
    models = {s["model"]: s for s in data["models"]}
    assert set(models) == {"m/a", "m/b", "m/c", "m/x", "m/x -> m/a"}

    a = models["m/a"]
    # by hand: per track L1 = (100 + 66.67 + 50)/3 = 72.22; L2 = mean(f1 70, f2 40) = 55; L3 = 60 (ineligible left out)
    assert a["tracks"]["gwas"]["L1"] == pytest.approx(650 / 9, abs=1e-5)
    assert a["tracks"]["gwas"]["L2"] == pytest.approx(55.0)
    assert a["tracks"]["gwas"]["L3"] == pytest.approx(60.0)
    comp = (650 / 9 * 55.0 * 60.0) ** (1 / 3)
    assert a["overall"] == pytest.approx(comp, abs=1e-5)
    # cost: per track 3 x (40k x $1 + 2k x $2) + 3 x 50k x $1 = $0.282, two tracks -> $0.564 over 15 tasks
    assert a["accounting"]["usd_total"] == pytest.approx(0.564)
    assert a["accounting"]["usd_per_task"] == pytest.approx(0.564 / 15)
    b = models["m/b"]
    # CNY at 8 per USD: per track 3 x (90k x 8 + 9k x 16) + 3 x 70k x 8 = 4.272 CNY; x2 / 8 = $1.068
    assert b["accounting"]["usd_total"] == pytest.approx(1.068)

    for name, s in models.items():
        row = rows[name]
        assert row["overall"] == (f"{s['overall']:.4f}" if s["overall"] is not None else "")
        assert float(row["tokens_m"]) == pytest.approx(s["accounting"]["tokens_m"], abs=1e-6)
    assert f"{a['overall']:.1f}" in md and f"{a['accounting']['usd_per_task']:.3f}" in md
    ci = a["ci95"]["overall"]
    assert f"{a['overall']:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]" in md
    l1 = a["levels"]["L1"]
    assert f"{l1['mean']:.1f} ± {l1['sd']:.1f}" in md

    # unpriced model: named, never zero
    assert models["m/c"]["accounting"]["usd_total"] is None
    assert rows["m/c"]["usd_per_task"] == "unpriced" and "m/c: unpriced" in md
    # refusals: m/x is unranked; the replay row is complete and ranked
    assert not models["m/x"]["ranked"] and rows["m/x"]["rank"] == ""
    rp = models["m/x -> m/a"]
    # of the three L3 dossiers m/x never ran, two are routed; m/a's gate-excluded gwas.L3.e is covered, not routed
    assert rp["ranked"] and rp["replay"]["routed_refused"] == 2 and rp["replay"]["routed_missing"] == 2
    assert rp["replay"]["gate_excluded"] == 1 and rp["replay"]["routed_by_level"]["L3"] == 2
    assert "### gwas" in md and "### scrna" in md
    tracks_csv = list(csv.DictReader((out / "leaderboard_tracks.csv").open()))
    assert {(r["model"], r["track"]) for r in tracks_csv} >= {("m/a", "gwas"), ("m/b", "scrna")}


def test_ledger_ruling_changes_the_leaderboard(tmp_path):
    runs, pricing = _runs(tmp_path)
    base = json.loads((_run_board(tmp_path, tmp_path / "o0", runs, pricing) / "leaderboard.json").read_text())
    led = tmp_path / "led.yaml"
    led.write_text(textwrap.dedent("""\
        kind: adjudication
        campaign: test
        entries:
        - id: 1
          run: ra
          model: m/a
          world: gwas.L1.w2
          replicate: 0
          component: score
          deterministic: 50
          ruling: 100
          adjudicator: tester
          date: 2026-10-02
          rationale: the action check misread the report
        """))
    argv = ["leaderboard", "--runs", *map(str, runs), "--format", "json", "--out", str(tmp_path / "o1"), "--pricing", str(pricing),
            "--ledgers", str(led), "--bootstrap", "50", "--permutations", "50"]
    assert _cli(argv) == 0
    ruled = json.loads((tmp_path / "o1" / "leaderboard.json").read_text())
    ga = lambda d: next(s for s in d["models"] if s["model"] == "m/a")  # noqa: E731
    assert ga(base)["tracks"]["gwas"]["L1"] == pytest.approx(650 / 9, abs=1e-5)
    assert ga(ruled)["tracks"]["gwas"]["L1"] == pytest.approx(800 / 9, abs=1e-5)
    assert ga(ruled)["rulings_applied"] == [1] and ruled["inputs"]["ledgers"] == ["test"]


def test_bad_fallback_and_missing_runs_are_clear_errors(tmp_path):
    from benchmark.errors import BenchmarkError

    runs, pricing = _runs(tmp_path)
    with pytest.raises(BenchmarkError, match="no run of model 'm/zzz'"):
        _cli(["leaderboard", "--runs", str(runs[0]), "--out", str(tmp_path / "o"), "--pricing", str(pricing), "--ledgers",
              "--fallback", "m/a=m/zzz"])
    with pytest.raises(BenchmarkError, match="holds no results.jsonl"):
        _cli(["leaderboard", "--runs", str(tmp_path / "nope"), "--out", str(tmp_path / "o"), "--ledgers"])


def test_leaderboard_constants_match_the_aggregator():
    import benchmark.aggregate as agg
    import benchmark.leaderboard as lb

    assert lb.LEVELS == agg.LEVELS and lb.THRESHOLDS == agg.THRESHOLDS
