"""The leaderboard's figures: stage profile, quality vs cost, all-stages-above-threshold curve.

Each `build_*` returns a matplotlib Figure (tests inspect its artists); each `*_figure(data, target)` saves it as PNG
to a path or a binary file object (the oversight workbench renders into memory). Identical inputs give identical
bytes: the Agg canvas, a fixed DPI, no timestamp or software metadata. Every figure is saved with a tight bounding
box, so long model names, legends and footnotes placed outside the axes are never cut off.

What each figure shows, and what it does not:
* Stage profile: L1-L3 mean ± SD across tracks per model; a level a model has no score for is drawn as absent
  ("n/a", no bar), never as a zero bar; a model with incomplete coverage is marked "*" with a footnote; the legend
  sits outside the axes.
* Quality vs cost: only models with a price and an Overall are points (a marker legend says o = ranked, x = not
  ranked); unpriced models are listed beside the axes, with where to add their rates (pricing/README.md).
* Threshold curve: the share of tracks whose every present stage mean exceeds t, drawn as an exact step function:
  the step of a track sits at its lowest stage mean itself (12.5 steps at 12.5), not at the next integer.
"""
from __future__ import annotations

from pathlib import Path
from typing import IO

LEVELS = ("L1", "L2", "L3")
FIGURE_DPI = 100
COLORS = ("#1f77b4", "#ff7f50", "#2a9d8f", "#6a4c93", "#e9c46a", "#8d99ae", "#d62828", "#588157")
MAX_LISTED = 12  # unpriced or unscored models named beside the quality-vs-cost axes before "+ N more"
PRICING_HINT = "to price a model, add its rates to a\ndated rate card: see pricing/README.md"


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=FIGURE_DPI)
    FigureCanvasAgg(fig)
    return fig


def save(fig, target: Path | IO[bytes]) -> None:
    """PNG, tight bounding box (nothing outside the axes is clipped), no metadata: byte-identical for identical input."""
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": "discern-leaderboard", "path.simplify": True}):
        fig.savefig(target, format="png", dpi=FIGURE_DPI, metadata={"Software": None}, bbox_inches="tight",
                    pad_inches=0.15)


def _incomplete(s: dict) -> bool:
    return not s["coverage"]["complete"]


def _listed(names: list[str]) -> list[str]:
    shown = names[:MAX_LISTED]
    return shown + ([f"+ {len(names) - MAX_LISTED} more (see leaderboard.md)"] if len(names) > MAX_LISTED else [])


# ------------------------------------------------------------------ stage profile

def build_stage_profile(data: dict):
    import numpy as np

    models = list(data["models"])
    fig = _figure(max(6.0, 1.2 * len(models) + 2), 4.5)
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(models))
    width = 0.25
    clipped: list[float] = []
    for i, lv in enumerate(LEVELS):
        have = [j for j, s in enumerate(models) if s["levels"][lv]["mean"] is not None]
        means = [models[j]["levels"][lv]["mean"] for j in have]
        sds = [models[j]["levels"][lv]["sd"] if models[j]["levels"][lv]["sd"] is not None else np.nan for j in have]
        # the SD bar is cut at the scale's ends (a mean of 50 +- 70.7 ran off the axes), said in the notes
        err = np.array([[min(sd, m) for sd, m in zip(sds, means)], [min(sd, 100 - m) for sd, m in zip(sds, means)]]) \
            if have else None
        clipped.extend(m for m, sd in zip(means, sds) if not np.isnan(sd) and (sd > m or sd > 100 - m))
        # an empty call still gives the level its legend entry
        ax.bar(x[have] + (i - 1) * width if have else [], means, width, yerr=err, capsize=2,
               label=lv, color=COLORS[i])
        for j, m in zip(have, means):  # a zero is a score: said in place, so it never reads as n/a
            if m == 0:
                ax.text(x[j] + (i - 1) * width, 1.5, "0", ha="center", va="bottom", fontsize=7, color="0.1",
                        gid=f"zero:{models[j]['model']}:{lv}")
        for j in (j for j in range(len(models)) if j not in have):  # absent, not zero
            ax.text(x[j] + (i - 1) * width, 1.5, "n/a", rotation=90, ha="center", va="bottom", fontsize=7, color="0.35",
                    gid=f"na:{models[j]['model']}:{lv}")
    ov = [s["overall"] if s["overall"] is not None else np.nan for s in models]
    ax.plot(x, ov, "kD", label="Overall")
    ax.set_xticks(x)
    ax.set_xticklabels([s["model"] + (" *" if _incomplete(s) else "") for s in models], rotation=30, ha="right",
                       fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("score (0-100), mean ± SD across tracks")
    ax.set_title("Stage profile per model")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    notes = ["n/a: no score at that level (not in the selection, or no answered world); no bar is drawn; "
             "0: a score of zero"]
    if clipped:
        notes.append("SD bars are cut at 0 and 100, the ends of the scale")
    inc = [s for s in models if _incomplete(s)]
    if inc:
        c = lambda s: s["coverage"]  # noqa: E731
        notes.append("* incomplete coverage, shown but not ranked: "
                     + "; ".join(f"{s['model']} {c(s)['answered']}/{c(s)['assigned']} answered" for s in inc))
    _notes_below(fig, notes)
    return fig


def _notes_below(fig, notes: list[str]) -> None:
    """The notes as figure text under everything else (left edge of the figure, wrapped to its width), with room
    made for them: a note set as the x label started at the axes and ran across the y axis's labels."""
    import textwrap

    lines = [w for n in notes for w in textwrap.wrap(n, width=int(fig.get_figwidth() * 15))]
    fig.text(0.01, 0.01, "\n".join(lines), ha="left", va="bottom", fontsize=7, gid="notes")
    fig.tight_layout(rect=(0, min(0.5, (len(lines) * 10 + 8) / (fig.get_figheight() * 72)), 1, 1))


def stage_profile_figure(data: dict, target: Path | IO[bytes]) -> None:
    save(build_stage_profile(data), target)


# ------------------------------------------------------------------ quality vs cost

def build_quality_cost(data: dict):
    from matplotlib.lines import Line2D

    fig = _figure(6.0, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    points = [(i, s) for i, s in enumerate(data["models"])
              if s["accounting"]["usd_per_task"] is not None and s["overall"] is not None]
    unpriced = [s["model"] for s in data["models"] if s["accounting"]["usd_per_task"] is None]
    unscored = [s["model"] for s in data["models"] if s["accounting"]["usd_per_task"] is not None and s["overall"] is None]
    costs = [s["accounting"]["usd_per_task"] for _, s in points]
    xmax = (max(costs) * 1.25) if costs and max(costs) > 0 else 1.0
    for i, s in points:
        cost, q = s["accounting"]["usd_per_task"], s["overall"]
        ax.scatter([cost], [q], color=COLORS[i % len(COLORS)], marker="o" if s["ranked"] else "x", zorder=3)
        right_half = cost > xmax / 2  # label toward the middle, so it stays over the axes
        ax.annotate(s["model"], (cost, q), fontsize=7, xytext=(-4 if right_half else 4, 4), textcoords="offset points",
                    ha="right" if right_half else "left", gid=f"label:{s['model']}")
    ax.set_xlabel("USD per assigned task (agent usage)")
    ax.set_ylabel("Overall (0-100)")
    ax.set_ylim(0, 105)
    ax.set_xlim(0, xmax)
    ax.set_title("Quality vs cost")
    ax.grid(True, alpha=0.3)
    if not points:
        ax.text(0.5, 0.5, "no model has both a price and an Overall score", transform=ax.transAxes, ha="center",
                va="center", fontsize=9, color="0.3")
    handles = [Line2D([], [], linestyle="none", marker="o", color="0.25", label="ranked (complete coverage)"),
               Line2D([], [], linestyle="none", marker="x", color="0.25", label="not ranked (incomplete coverage)")]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              title="marker", title_fontsize=7)
    side = []
    if unpriced:
        side += ["Not plotted, unpriced", "(no rate card entry):", *[f"  {m}" for m in _listed(unpriced)], PRICING_HINT]
    if unscored:
        side += (["", "Not plotted, no Overall:"] if side else ["Not plotted, no Overall:"]) + [f"  {m}" for m in _listed(unscored)]
    if side:
        ax.annotate("\n".join(side), xy=(1.02, 0.0), xycoords="axes fraction", ha="left", va="bottom", fontsize=7,
                    gid="not-plotted", bbox={"boxstyle": "round,pad=0.4", "facecolor": "#fff4e0", "edgecolor": "0.6"})
    fig.tight_layout()
    return fig


def quality_cost_figure(data: dict, target: Path | IO[bytes]) -> None:
    save(build_quality_cost(data), target)


# ------------------------------------------------------------------ threshold curve

def track_floors(s: dict) -> list[float]:
    """Per scored track, its lowest present stage mean: the track meets requirement t exactly when floor > t."""
    floors = []
    for t in sorted(s["tracks"]):
        ts = s["tracks"][t]
        if ts.get("composite") is None:
            continue
        present = [ts[lv] for lv in LEVELS if ts.get(lv) is not None]
        if present:
            floors.append(float(min(present)))
    return floors


def threshold_steps(floors: list[float], lo: float = 0.0, hi: float = 100.0) -> tuple[list[float], list[float]]:
    """The exact step function t -> share of floors > t on [lo, hi], as points for `step(where="post")`: the share
    drops AT each floor (a floor of 12.5 no longer exceeds t = 12.5), so the steps sit at the floors themselves."""
    if not floors:
        return [], []
    n = len(floors)
    share = lambda t: sum(f > t for f in floors) / n  # noqa: E731
    xs = [lo] + sorted({f for f in floors if lo < f < hi}) + [hi]
    return xs, [share(x) for x in xs]


DASHES = ("-", (0, (5, 2)), (0, (2, 1.5)), (0, (6, 2, 1, 2)), (0, (1, 1)), (0, (8, 3)), (0, (3, 1, 1, 1, 1, 1)),
          (0, (4, 4)))


def build_threshold(data: dict):
    fig = _figure(6.0, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    n = len(data["models"])
    for i, s in enumerate(data["models"]):
        xs, ys = threshold_steps(track_floors(s))
        if xs:  # equal curves stay visible: each later one thinner and dashed differently, drawn over the earlier
            ax.step(xs, ys, where="post", label=s["model"], color=COLORS[i % len(COLORS)], gid=f"curve:{s['model']}",
                    linewidth=1.2 + 2.4 * (n - 1 - i) / max(1, n - 1), linestyle=DASHES[i % len(DASHES)], zorder=2 + i)
    ax.set_xlabel("score requirement t (0-100)")
    ax.set_ylabel("share of tracks with every stage > t")
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("All-stages-above-threshold curve")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return fig


def threshold_figure(data: dict, target: Path | IO[bytes]) -> None:
    save(build_threshold(data), target)


FIGURES = (("stage_profile.png", stage_profile_figure), ("quality_vs_cost.png", quality_cost_figure),
           ("threshold_curve.png", threshold_figure))
