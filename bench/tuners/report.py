"""Tables (printed, markdown) and the speedup-vs-trials plot, shared by replay and live."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the headless backend)

from bench.tuners import metrics  # noqa: E402


def _n(x: float) -> str:
    return ">budget" if math.isinf(x) else f"{x:g}"


def summary_table(runs: dict[str, list[list[dict]]], oracle: float, trials: int) -> str:
    """Final verified speedup (median, 25-75 %), share of the oracle, trials to 90 / 95 % of it."""
    lines = ["| method | runs | trials run: median (max) | speedup after all trials: median (25-75 %) | of oracle "
             "| trials to 90 % (reached) | trials to 95 % (reached) |", "|---|---|---|---|---|---|---|"]
    for method, rs in runs.items():
        c = metrics.curve(rs, trials)
        t90, r90 = metrics.median_trials_to(rs, 0.90 * oracle)
        t95, r95 = metrics.median_trials_to(rs, 0.95 * oracle)
        spent = [len(r) for r in rs]
        lines.append(f"| {method} | {len(rs)} | {statistics.median(spent):g} ({max(spent)}) | {c['median'][-1]:.3f}x ({c['q25'][-1]:.3f}-{c['q75'][-1]:.3f}) "
                     f"| {c['median'][-1] / oracle:.1%} | {_n(t90)} ({r90:.0%}) | {_n(t95)} ({r95:.0%}) |")
    return "\n".join(lines)


def waste_table(runs: dict[str, list[list[dict]]]) -> str:
    """Seconds per run on failing trials by status, and their share of all trial seconds."""
    shown = ("oom", "timeout", "crash", "aborted_slow", "numerics")
    lines = ["| method | " + " | ".join(f"{s} s" for s in shown) + " | wasted s | all trials s | share |",
             "|---|" + "---|" * (len(shown) + 3)]
    for method, rs in runs.items():
        w = metrics.waste(rs)
        lines.append(f"| {method} | " + " | ".join(f"{w[s]:.1f}" for s in shown)
                     + f" | {w['wasted_s']:.1f} | {w['total_s']:.1f} | {w['share']:.1%} |")
    return "\n".join(lines)


def overhead_table(result: dict[str, dict[int, tuple[float, float]]]) -> str:
    sizes = sorted({n for r in result.values() for n in r})
    lines = ["| method | " + " | ".join(f"at {n} trials: wall ms (cpu ms)" for n in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    for method, r in result.items():
        cells = [f"{r[n][0] * 1000:.0f} ({r[n][1] * 1000:.0f})" if n in r else "-" for n in sizes]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs: dict[str, list[list[dict]]], oracle: float, trials: int, path: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(8.5, 4.2), dpi=90)
    x = range(1, trials + 1)
    for method, rs in runs.items():
        c = metrics.curve(rs, trials)
        (line,) = ax.plot(x, c["median"], label=method, lw=2 if method.startswith("infrarsi") else 1.2)
        ax.fill_between(x, c["q25"], c["q75"], color=line.get_color(), alpha=0.12)
    ax.axhline(oracle, color="k", ls="--", lw=0.8, label=f"best known {oracle:.2f}x")
    ax.axhline(0.9 * oracle, color="grey", ls=":", lw=0.8, label="90 % of it")
    ax.set_xlabel("trials spent")
    ax.set_ylabel("verified speedup of the pick (median, 25-75 %)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
