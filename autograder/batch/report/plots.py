"""The class report's plots (matplotlib, the `batch` extra), each a PNG inlined as a data URI: grids of small
multiples that stay readable from 10 submissions to 300, every panel of a grid on the same axes, so that components
compare at a glance."""
from __future__ import annotations

import base64
import html
import io
import math
import statistics

import numpy as np

COLUMNS = 5  # small multiples per row
LABELLED = 4  # the hardest cases labelled in each component's panel
NEAR = 0.12  # of an axis' span: labels of cases closer than this are merged
JITTER = 0.015  # of an axis' span: cases with the same rates drawn apart


def _pyplot():
    """matplotlib, imported when a report is drawn: grading never needs it."""
    import matplotlib

    matplotlib.use("Agg")  # no display: the figures only ever become PNG bytes
    import matplotlib.pyplot as plt

    return plt


def _png(fig, alt: str) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    _pyplot().close(fig)
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


def _grid(count: int, width: float = 2.6, height: float = 1.9):
    """`count` panels sharing both axes; each bottom panel of its column labels the x axis."""
    columns = min(COLUMNS, count)
    rows = math.ceil(count / columns)
    fig, axes = _pyplot().subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False,
                                   sharex=True, sharey=True)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    for ax in axes.flat[max(0, count - columns):count]:  # above an empty place, a panel is its column's lowest
        ax.tick_params(labelbottom=True)
    return fig, list(axes.flat[:count])


def scores(scores: dict) -> str:
    """The total and each component: a histogram of the share of points, over those who submitted it."""
    panels = [("total", scores["total"])] + list(scores["components"].items())
    fig, axes = _grid(len(panels))
    for ax, (name, d) in zip(axes, panels):
        if not d["n"]:
            ax.set_axis_off()
            ax.text(0.5, 0.5, f"{name}:\nnot submitted", ha="center", va="center", fontsize=9, transform=ax.transAxes)
            continue
        shares = [100 * v / d["max"] for v in d["values"]] if d["max"] else []
        ax.hist(shares, bins=20, range=(0, 100), color="0.55", edgecolor="white")
        if shares:
            ax.axvline(statistics.median(shares), color="black", linewidth=1)
        who = f"{d['n']} submitted" if name != "total" else f"{d['n']} graded"
        ax.set_title(f"{name} ({who})", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_xlim(0, 100)
    axes[0].set_xlabel("% of points (line: median)", fontsize=8)
    axes[0].set_ylabel("submissions", fontsize=8)
    fig.tight_layout()
    return _png(fig, "Score distributions: the total and each component, as a share of its points")


def cases(components: list[dict]) -> str:
    """One panel per component anyone submitted: each case's pass rate against its discrimination, every panel zoomed
    to where all components' cases lie, jittered where points coincide; its hardest cases labelled, neighbouring labels
    merged into one."""
    shown = [c for c in components if c["cases"] and c["submitted"]]
    if not shown:
        return ""
    fig, axes = _grid(len(shown), width=3.0, height=2.4)
    rng = np.random.default_rng(0)  # the same picture every time the report is written
    rates = [r["pass_rate"] for c in shown for r in c["cases"]]
    spread = [r["discrimination"] for c in shown for r in c["cases"]]
    left, bottom, top = min(min(rates) - 0.05, 0.9), min(min(spread) - 0.1, -0.1), max(max(spread) + 0.1, 0.1)  # every panel's
    for ax, c in zip(axes, shown):
        x = np.array([r["pass_rate"] for r in c["cases"]])
        y = np.array([r["discrimination"] for r in c["cases"]])
        ax.scatter(x + rng.uniform(-JITTER, JITTER, len(x)) * (1.02 - left), y + rng.uniform(-JITTER, JITTER, len(y)) * (top - bottom),
                   s=12, alpha=0.6, color="0.2")
        ax.axhline(0, color="0.6", linewidth=0.8)
        ax.set(xlim=(left, 1.02), ylim=(bottom, top))
        _label(ax, [r for r in c["cases"] if r["pass_rate"] < 1][:LABELLED], (1.02 - left, top - bottom))
        ax.set_title(f"{c['component']} ({c['submitted']} submitted)", fontsize=9)
        ax.tick_params(labelsize=7)
    axes[0].set_xlabel("share passing", fontsize=8)
    axes[0].set_ylabel("discrimination", fontsize=8)
    fig.tight_layout()
    return _png(fig, "Cases of each component: pass rate against discrimination")


def _label(ax, cases: list[dict], span: tuple[float, float]) -> None:
    """Label each case by its number, a case near one already labelled (within NEAR of each axis' span) joining it."""
    labels: list[tuple[float, float, list[str]]] = []
    for r in cases:
        near = next((l for l in labels if abs(l[0] - r["pass_rate"]) < NEAR * span[0] and abs(l[1] - r["discrimination"]) < NEAR * span[1]), None)
        if near:
            near[2].append(r["number"])
        else:
            labels.append((r["pass_rate"], r["discrimination"], [r["number"]]))
    for x, y, numbers in labels:
        text = ", ".join(numbers[:3]) + (f" +{len(numbers) - 3}" if len(numbers) > 3 else "")
        ax.annotate(text, (x, y), fontsize=6.5, xytext=(3, 3), textcoords="offset points")


def timing(timing: dict) -> str:
    """Each timing case: the ratios, log scale, against the policy's thresholds; every panel has the same bins."""
    ratios, thresholds = timing["ratios"], timing["thresholds"]
    fig, axes = _grid(len(ratios), width=3.2)
    every = [v for values in ratios.values() for v in values]
    low, high = min(every + [thresholds["flag_below"]]), max(every + [thresholds["zero_at"]])
    bins = np.geomspace(low * 0.9, high * 1.1, 25)
    for ax, (name, values) in zip(axes, ratios.items()):
        ax.hist(values, bins=bins, color="0.55", edgecolor="white")
        for key, style in (("flag_below", ":"), ("full_until", "--"), ("zero_at", "-.")):
            ax.axvline(thresholds[key], color="black", linestyle=style, linewidth=1, label=f"{key.replace('_', ' ')} {thresholds[key]:g}x")
        ax.set_xscale("log")
        ax.set_title(name, fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].set_xlabel("student time / reference time (left of 1: faster)", fontsize=8)
    axes[0].set_ylabel("submissions", fontsize=8)
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    return _png(fig, "Timing ratios of each timing case against the policy's thresholds")


def seconds(values: list[float]) -> str:
    fig, ax = _pyplot().subplots(figsize=(4, 2))
    ax.hist(values, bins=20, color="0.55", edgecolor="white")
    ax.set_title("Grading time per submission", fontsize=9)
    ax.set_xlabel("seconds", fontsize=8)
    ax.tick_params(labelsize=7)
    return _png(fig, "Grading time per submission")
