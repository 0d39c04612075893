"""`leaderboard`: Table 1, per-track tables and figures; identical inputs give identical bytes (SPEC R11)."""
from __future__ import annotations

import argparse
import csv
import json
import textwrap

import pytest

from benchmark.score.leaderboard import add_leaderboard_parser
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
        a.append(rec(f"{t}.L3.d", t, "L3", 60.0, model="m/a", eligible=True, commitment="commit", axes={"D": 2, "Q": 2, "N": 1.4}))
        b.append(rec(f"{t}.L3.d", t, "L3", 45.0, model="m/b", eligible=True, commitment="abstain",
                     axes={"D": 1.7, "Q": 1.0, "abstention_justified": 1.0}))
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
    import benchmark.score.aggregate as agg
    import benchmark.score.leaderboard as lb

    assert lb.LEVELS == agg.LEVELS and lb.THRESHOLDS == agg.THRESHOLDS


# ------------------------------------------------------------------ figures, scale, verification, progress

def _board(runs, pricing, ledgers=()):
    from benchmark.score.leaderboard import build

    return build(runs, ledgers=list(ledgers), pricing_root=pricing, bootstrap=50, permutations=50)


def _texts(fig):
    return [t for ax in fig.axes for t in ax.texts]


def _inches(fig, artist):
    renderer = fig.canvas.get_renderer()
    return artist.get_window_extent(renderer).transformed(fig.dpi_scale_trans.inverted())


def _saved_frame(fig):
    """The region of the figure (inches) the saved PNG shows, and the PNG's size in pixels."""
    import io

    from PIL import Image

    from benchmark.score.leaderboard_figures import FIGURE_DPI, save

    buf = io.BytesIO()
    save(fig, buf)
    with Image.open(io.BytesIO(buf.getvalue())) as im:
        w, h = im.size
    tight = fig.get_tightbbox(fig.canvas.get_renderer())
    pad = 0.15
    return (tight.x0 - pad, tight.y0 - pad, tight.x0 - pad + w / FIGURE_DPI, tight.y0 - pad + h / FIGURE_DPI), (w, h)


def _inside(box, frame, tol=0.02):
    return box.x0 >= frame[0] - tol and box.y0 >= frame[1] - tol and box.x1 <= frame[2] + tol and box.y1 <= frame[3] + tol


def test_quality_vs_cost_plots_priced_models_and_lists_unpriced_ones(tmp_path):
    from benchmark.score.leaderboard import render_markdown
    from benchmark.score.leaderboard_figures import build_quality_cost

    runs, pricing = _runs(tmp_path)
    data = _board(runs, pricing)
    fig = build_quality_cost(data)
    labels = {t.get_text() for t in _texts(fig) if (t.get_gid() or "").startswith("label:")}
    assert labels == {"m/a", "m/b", "m/x"}, "every priced, scored model is a labelled point; m/c is not"
    (side,) = [t for t in _texts(fig) if t.get_gid() == "not-plotted"]
    assert "unpriced" in side.get_text() and "m/c" in side.get_text() and "pricing/README.md" in side.get_text()
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["ranked (complete coverage)", "not ranked (incomplete coverage)"]
    assert [h.get_marker() for h in legend.legend_handles] == ["o", "x"]
    md = render_markdown(data)
    assert "m/c: unpriced" in md and "pricing/README.md" in md and "new dated rate card" in md

    # only unpriced models: the figure still says what is known and what is missing, not an empty canvas
    only_c = _board([runs[3]], pricing)
    fig = build_quality_cost(only_c)
    texts = " ".join(t.get_text() for t in _texts(fig))
    assert "no model has both a price and an Overall score" in texts and "m/c" in texts


def test_long_labels_and_outside_legends_are_inside_the_saved_png(tmp_path):
    from benchmark.score.leaderboard_figures import build_quality_cost

    long = "m/an-exceptionally-long-model-name-that-runs-off-a-six-inch-figure-2026-10-01-preview"
    runs, pricing = _runs(tmp_path)
    card = (pricing / "2026-01-01.yaml").read_text() + f"  {long}: {{input: 30, output: 30}}\n"
    (pricing / "2026-01-01.yaml").write_text(card)
    recs = [rec("gwas.L1.w0", "gwas", "L1", 40.0, model=long, tokens_in=90_000)]
    data = _board([*runs, write_run(tmp_path / "runs", "rlong", recs, long)], pricing)
    fig = build_quality_cost(data)
    frame, (w, _) = _saved_frame(fig)
    assert w > 600, "the saved image grew to hold what lies outside the 6-inch canvas"
    (label,) = [t for t in _texts(fig) if t.get_gid() == f"label:{long}"]
    assert _inside(_inches(fig, label), frame), "the long label is inside the PNG, not clipped"
    assert _inside(_inches(fig, fig.axes[0].get_legend()), frame)
    (side,) = [t for t in _texts(fig) if t.get_gid() == "not-plotted"]
    assert _inside(_inches(fig, side), frame)


def test_stage_profile_legend_outside_missing_levels_absent_incomplete_marked(tmp_path):
    from benchmark.score.leaderboard_figures import build_stage_profile

    runs, pricing = _runs(tmp_path)
    data = _board(runs, pricing)
    fig = build_stage_profile(data)
    ax = fig.axes[0]
    models = [s["model"] for s in data["models"]]
    bars = {c.get_label(): c for c in ax.containers if hasattr(c, "patches")}
    for lv in ("L1", "L2", "L3"):
        have = [s["model"] for s in data["models"] if s["levels"][lv]["mean"] is not None]
        assert len(bars[lv].patches) == len(have), f"{lv}: one bar per model that has the level, none drawn as 0"
        for p, m in zip(bars[lv].patches, have):
            assert p.get_height() == pytest.approx(next(s for s in data["models"] if s["model"] == m)["levels"][lv]["mean"])
    na = {t.get_gid() for t in ax.texts if t.get_text() == "n/a"}
    assert na == {"na:m/c:L2", "na:m/c:L3", "na:m/x:L3"}
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    assert legend.x0 >= ax.get_window_extent(renderer).x1, "the legend sits outside the axes"
    assert not any(legend.overlaps(p.get_window_extent(renderer)) for c in bars.values() for p in c.patches)
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == [m + (" *" if m in ("m/c", "m/x") else "") for m in models]
    (note,) = [t for t in fig.texts if t.get_gid() == "notes"]
    foot = note.get_text().replace("\n", " ")
    assert "* incomplete coverage" in foot and "m/c 1/15 answered" in foot and "m/x 10/15 answered" in foot
    frame, _ = _saved_frame(fig)
    assert _inside(_inches(fig, ax.get_legend()), frame)


@pytest.mark.parametrize("n_models", [1, 2, 8])
def test_figures_are_right_and_readable_for_one_two_and_eight_models_zeros_included(tmp_path, n_models):
    """Issue 41 item 5: a zero is drawn as a zero (not as n/a), an SD bar stays on the 0-100 scale, equal threshold
    curves stay visible, and the notes sit below the axes, crossing neither the axes nor the y label."""
    from benchmark.score.leaderboard_figures import build_stage_profile, build_threshold

    _, pricing = _runs(tmp_path)
    runs = []
    for k in range(n_models):
        m = f"m/model-{k}"
        hi = 100.0 if k % 2 == 0 else 0.0  # L1 scores 0 and 100 across tracks: mean 50, SD 70.7
        recs = [rec("gwas.L1.w0", "gwas", "L1", hi, model=m), rec("scrna.L1.w0", "scrna", "L1", 100.0 - hi, model=m),
                rec("gwas.L2.w0", "gwas", "L2", 0.0, model=m), rec("scrna.L2.w0", "scrna", "L2", 0.0, model=m)]
        runs.append(write_run(tmp_path / "runs", f"r{k}", recs, m))
    data = _board(runs, pricing)
    fig = build_stage_profile(data)
    ax = fig.axes[0]
    zeros = {t.get_gid() for t in ax.texts if t.get_text() == "0"}
    assert zeros == {f"zero:m/model-{k}:L2" for k in range(n_models)}, "each zero mean is labelled 0"
    assert {t.get_gid() for t in ax.texts if t.get_text() == "n/a"} == {f"na:m/model-{k}:L3" for k in range(n_models)}
    for line in ax.lines:  # error bars (and the Overall marker) within the scale
        ys = [y for y in line.get_ydata() if y == y]
        assert all(-1e-9 <= y <= 100 + 1e-9 for y in ys), ys
    for coll in ax.collections:
        for seg in getattr(coll, "get_segments", lambda: [])():
            assert all(-1e-9 <= y <= 100 + 1e-9 for _, y in seg), seg
    renderer = fig.canvas.get_renderer()
    (note,) = [t for t in fig.texts if t.get_gid() == "notes"]
    nb = note.get_window_extent(renderer)
    assert "SD bars are cut at 0 and 100" in note.get_text()
    assert not nb.overlaps(ax.get_window_extent(renderer)) and not nb.overlaps(ax.yaxis.label.get_window_extent(renderer))
    assert all(not nb.overlaps(t.get_window_extent(renderer)) for t in ax.get_xticklabels() if t.get_text())
    frame, _ = _saved_frame(fig)
    assert _inside(_inches(fig, note), frame)
    # identical curves: every one drawn, each distinguishable (width and dash pattern)
    fig = build_threshold(data)
    curves = [ln for ln in fig.axes[0].lines if (ln.get_gid() or "").startswith("curve:")]
    assert len(curves) == n_models
    assert len({(round(c.get_linewidth(), 3), str(c.get_linestyle()), str(c.get_dashes() if hasattr(c, "get_dashes") else ""))
                for c in curves}) == n_models


def test_threshold_step_sits_at_the_stage_mean_itself(tmp_path):
    from benchmark.score.leaderboard_figures import build_threshold, threshold_steps

    recs = [rec("gwas.L1.w0", "gwas", "L1", 12.5, model="m/a"), rec("gwas.L2.w0", "gwas", "L2", 50.0, model="m/a"),
            rec("gwas.L3.d", "gwas", "L3", 50.0, model="m/a", eligible=True, commitment="commit", axes={"D": 1.5, "Q": 1.5, "N": 1.5}),
            rec("scrna.L1.w0", "scrna", "L1", 80.0, model="m/a"), rec("scrna.L2.w0", "scrna", "L2", 70.0, model="m/a"),
            rec("scrna.L3.d", "scrna", "L3", 90.0, model="m/a", eligible=True, commitment="commit", axes={"D": 2.7, "Q": 2.7, "N": 2.7})]
    _, pricing = _runs(tmp_path)
    data = _board([write_run(tmp_path / "runs", "rt", recs, "m/a")], pricing)
    s = data["models"][0]
    assert s["threshold_curve"][12] == 1.0 and s["threshold_curve"][13] == 0.5  # the integer grid: > 12, not > 13
    fig = build_threshold(data)
    (line,) = [ln for ln in fig.axes[0].lines if ln.get_gid() == "curve:m/a"]
    xs, ys = list(line.get_xdata()), list(line.get_ydata())
    assert line.get_drawstyle() == "steps-post"
    assert xs == [0.0, 12.5, 70.0, 100.0] and ys == [1.0, 0.5, 0.0, 0.0]
    assert threshold_steps([12.5]) == ([0.0, 12.5, 100.0], [1.0, 0.0, 0.0])
    assert threshold_steps([0.0, 100.0]) == ([0.0, 100.0], [0.5, 0.0]), "a floor of 0 never exceeds t = 0"


def test_markdown_uses_one_scale_and_says_so(tmp_path):
    import re

    runs, pricing = _runs(tmp_path)
    out = _run_board(tmp_path, tmp_path / "o", runs, pricing)
    md = (out / "leaderboard.md").read_text()
    assert md.splitlines()[2].startswith("Scale: every score, share and rate in this file is on 0-100")
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| Rank")]
    cells = [c.strip() for ln in rows for c in ln.strip("|").split("|")]
    assert not [c for c in cells if re.search(r"\d%", c)], "no cell is printed in per cent"
    data = json.loads((out / "leaderboard.json").read_text())
    x = next(s for s in data["models"] if s["model"] == "m/x")
    row = next(ln for ln in rows if ln.startswith("| - | *m/x*"))
    assert f"| {100 * x['coverage']['coverage']:.1f} |" in row  # coverage 10/15 on 0-100
    assert f"| m/x | {100 * x['threshold_curve'][0]:.1f} |" in md  # threshold shares on 0-100 too


def test_unverified_results_and_pending_rulings_are_shown(tmp_path):
    from benchmark.score.leaderboard import render_markdown
    from benchmark.run.store import RunStore
    from tests.aggregate_helpers import write_verification

    runs, pricing = _runs(tmp_path)
    ra = runs[0]
    recs = RunStore(ra).results()

    def line(r, discrepancies=()):
        return {"key": f"{r.world_id}__r{r.replicate}", "world_id": r.world_id, "replicate": r.replicate, "level": r.level,
                "verifier_model": "v/1", "parsed": True, "verdict": {}, "reason": "", "discrepancies": list(discrepancies),
                "usage": {"tokens_in": 1, "tokens_out": 1, "calls": 1, "model": "v/1"}}

    l1 = [r for r in recs if r.level == "L1"]
    disagree = [{"component": "state", "deterministic": "CLEAN-CORRECT", "verifier": "MISSED"}]
    l2 = [r for r in recs if r.level == "L2"]
    unreadable = dict(line(l2[0]), parsed=False, reason="unparseable answer")  # checked nothing: still unverified
    write_verification(ra, [line(l1[0], disagree), line(l1[1], disagree), line(l1[2], disagree), line(l1[3]), unreadable])
    led = tmp_path / "led.yaml"
    led.write_text(textwrap.dedent(f"""\
        kind: adjudication
        campaign: test
        entries:
        - id: 1
          run: ra
          model: m/a
          world: {l1[0].world_id}
          replicate: 0
          component: state
          deterministic: CLEAN-CORRECT
          ruling: CLEAN-CORRECT
          adjudicator: tester
          date: 2026-10-02
          rationale: the verifier misread the report
        """))
    data = _board(runs, pricing, [led])
    a = next(s for s in data["models"] if s["model"] == "m/a")
    verifiable = sum(r.level in ("L1", "L2") or bool(r.l3_axes) for r in recs)
    assert a["verification"] == {"verifiable": verifiable, "verified": 4, "unverified": verifiable - 4, "pending": 2,
                                 "runs": [str(ra)]}
    md = render_markdown(data)
    text = f"{verifiable - 4} of {verifiable} unverified; 2 rulings pending"
    assert f"| {text} |" in md.split("## Per-track")[0]
    assert f"m/a: {text}: these results are not final" in md and "ledger pending RUN" in md
    out = tmp_path / "o"
    _run_board(tmp_path, out, runs, pricing, "--ledgers", str(led))
    row = next(r for r in csv.DictReader((out / "leaderboard.csv").open()) if r["model"] == "m/a")
    assert (row["verifiable"], row["unverified"], row["pending_rulings"]) == (str(verifiable), str(verifiable - 4), "2")
    replay = next(s for s in json.loads((out / "leaderboard.json").read_text())["models"] if s["model"] == "m/x -> m/a")
    assert replay["verification"] is None, "a replay row mixes two models' results: its verification is theirs"
    assert next(ln for ln in (out / "leaderboard.md").read_text().splitlines() if "| m/x -> m/a |" in ln).endswith("| - |")


def test_progress_lines_in_a_log_and_a_bar_on_a_terminal(tmp_path, capsys, monkeypatch):
    import benchmark.run.progress as progress_mod
    from benchmark.score.leaderboard import outputs

    runs, pricing = _runs(tmp_path)
    monkeypatch.setenv("BENCHMARK_PROGRESS", "1")
    _run_board(tmp_path, tmp_path / "o", runs, pricing)
    err = capsys.readouterr().err
    total = len(runs) + 2 + len(outputs(["md", "csv", "json"]))
    lines = [ln for ln in err.splitlines() if ln.startswith("[leaderboard] ")]
    assert len(lines) >= 2 and f"loading {runs[0]}" in lines[0], err  # one plain line per phase, throttled
    assert f" {total}/{total} " in lines[-1], err  # the last line always shows

    seen = []
    real = progress_mod.progress

    def recording(label, n, finished=False):
        seen.append((label, n))
        return real(label, n, finished)

    monkeypatch.setattr(progress_mod, "progress", recording)
    monkeypatch.setattr(progress_mod.sys.stderr, "isatty", lambda: True, raising=False)
    _run_board(tmp_path, tmp_path / "o2", runs, pricing)
    assert seen == [("leaderboard", total)]
    assert "[leaderboard]" not in capsys.readouterr().err, "a terminal gets the bar, not log lines"


def test_pricing_readme_worked_example_is_a_valid_card(tmp_path):
    import datetime as dt
    import re

    from benchmark.score.accounting import Pricing, load_card
    from benchmark.suite.loader import REPO_ROOT

    readme = (REPO_ROOT / "pricing" / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", readme, re.S)
    assert blocks, "pricing/README.md shows the new card"
    card_text = textwrap.dedent(blocks[0])
    (tmp_path / "2026-10-15.yaml").write_text(card_text)
    card = load_card(tmp_path / "2026-10-15.yaml")
    priced = Pricing([card]).price("acme/sparrow-2", 1_000_000, 1_000_000, dt.date(2026, 10, 15))
    assert priced.usd == pytest.approx(2.5) and Pricing([card]).price("sparrow-2", 0, 1e6, dt.date(2026, 10, 16)).usd == 2.0
    assert "Never change the numbers of an existing card" in readme
