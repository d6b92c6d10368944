"""The report's four plots, drawn with matplotlib's Agg renderer into PNG files.

Each plot has a data function (pure, tested) and a draw function. Figures are built without
pyplot, so drawing keeps no global state and is safe off the main thread (the language server).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter

from infrarsi.byte_units import GIB, MIB
from infrarsi.report import formatting
from infrarsi.report.model import Report

STATUS_COLORS = {
    "ok": "#2e7d32",
    "oom": "#c62828",
    "timeout": "#ef6c00",
    "aborted_slow": "#f9a825",
    "crash": "#6a1b9a",
    "numerics": "#1565c0",
    "contract": "#5d4037",
}
MISCALIBRATED = "#c62828"
CALIBRATED = "#1565c0"
PRIOR = "#9e9e9e"
DPI = 110
ARROW = 0.12
"""Length of a censoring arrow, as a fraction of the memory axis."""


# --- data ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemoryPoint:
    number: int
    step_s: float
    peak_bytes: int
    status: str


@dataclass(frozen=True, slots=True)
class CensoredPoint:
    """An OOM trial: its peak is only known to exceed ``level_bytes``."""

    number: int
    level_bytes: int
    """The budget, or the higher level the watchdog saw before the kill."""
    step_s: float | None
    """None when it died before a measured step."""


@dataclass(frozen=True, slots=True)
class MemoryPlotData:
    points: list[MemoryPoint]
    censored: list[CensoredPoint]
    budget_bytes: int


def memory_plot_data(report: Report) -> MemoryPlotData:
    points, censored = [], []
    for t in report.trials:
        if t.status == "oom":
            censored.append(CensoredPoint(number=t.number, level_bytes=max(report.budget_bytes, t.peak_bytes or 0),
                                          step_s=t.step_s))
        elif t.step_s is not None and t.peak_bytes:
            points.append(MemoryPoint(number=t.number, step_s=t.step_s, peak_bytes=t.peak_bytes, status=t.status))
    return MemoryPlotData(points=points, censored=censored, budget_bytes=report.budget_bytes)


@dataclass(frozen=True, slots=True)
class PriorPoint:
    key: str
    quantity: str
    prior: tuple[float, float, float]
    """Multiplier the prior expected: (mean, mean − 1 sd, mean + 1 sd)."""
    observed: tuple[float, float, float] | None
    """Multiplier the trials showed, the same way; None when the data could not pin it down."""
    miscalibrated: bool


def _band(log_mean: float, log_sd: float) -> tuple[float, float, float]:
    return math.exp(log_mean), math.exp(log_mean - log_sd), math.exp(log_mean + log_sd)


def prior_plot_data(report: Report) -> list[PriorPoint]:
    out = []
    for c in report.prior_checks:
        if not (math.isfinite(c.prior_mean) and math.isfinite(c.prior_sd)):
            continue
        seen = math.isfinite(c.observed) and math.isfinite(c.observed_sd)
        out.append(PriorPoint(key=c.key, quantity=c.quantity, prior=_band(c.prior_mean, c.prior_sd),
                              observed=_band(c.observed, c.observed_sd) if seen else None,
                              miscalibrated=c.miscalibrated))
    return out


# --- drawing -------------------------------------------------------------------------------------


def _scale(budget_bytes: int) -> tuple[float, str]:
    return (GIB, "GiB") if budget_bytes >= GIB else (MIB, "MiB")


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def draw_timeline(report: Report, path: Path) -> Path:
    trials = report.trials
    fig = Figure(figsize=(8, max(2.5, 0.22 * len(trials) + 1.2)))
    ax = fig.add_subplot()
    for i, t in enumerate(trials):
        ax.barh(i, max(t.wall_s, 0.0), left=t.start_s, color=STATUS_COLORS.get(t.status, "#757575"), height=0.8)
    ax.set_yticks(range(len(trials)), [f"#{t.number} {t.kind}" for t in trials], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("cumulative trial wall time (s)")
    title = f"{len(trials)} trials, {report.spent_s:.0f} s; {report.failed_s:.0f} s on failures"
    if report.interrupted_s:
        title += f" (incl. {report.interrupted_s:.0f} s interrupted, not drawn)"
    ax.set_title(title, fontsize=10)
    seen = list(dict.fromkeys(t.status for t in trials))
    for status in seen:
        ax.barh(0, 0, color=STATUS_COLORS.get(status, "#757575"), label=status)
    if seen:
        # Trials run left to right and top to bottom, so the top right corner is always empty.
        ax.legend(loc="upper right", fontsize=7, ncols=min(4, len(seen)))
    return _save(fig, path)


def _arrow(ax: Axes, x: float, level: float, length: float) -> None:
    ax.annotate("", xy=(x, level + length), xytext=(x, level),
                arrowprops={"arrowstyle": "-|>", "color": STATUS_COLORS["oom"], "lw": 1.5})
    ax.plot([x], [level], marker="_", markersize=10, color=STATUS_COLORS["oom"])


def draw_memory(report: Report, path: Path) -> Path:
    data = memory_plot_data(report)
    unit, unit_name = _scale(data.budget_bytes)
    untimed = [c for c in data.censored if c.step_s is None]
    fig = Figure(figsize=(8, 4.5))
    if untimed:
        grid = fig.add_gridspec(1, 2, width_ratios=(5, 1), wspace=0.05)
        ax = fig.add_subplot(grid[0])
        side = fig.add_subplot(grid[1], sharey=ax)
    else:
        ax, side = fig.add_subplot(), None
    levels = [p.peak_bytes for p in data.points] + [c.level_bytes for c in data.censored] + [data.budget_bytes]
    # Peaks usually sit within tens of percent of each other: an axis from zero would flatten them.
    bottom, top = 0.9 * min(levels) / unit, max(levels) / unit
    length = ARROW * (top - bottom) if top > bottom else ARROW * top
    for status in dict.fromkeys(p.status for p in data.points):
        mine = [p for p in data.points if p.status == status]
        ax.scatter([p.step_s for p in mine], [p.peak_bytes / unit for p in mine], s=22,
                   color=STATUS_COLORS.get(status, "#757575"), label=status, zorder=3)
    for c in data.censored:
        if c.step_s is not None:
            _arrow(ax, c.step_s, c.level_bytes / unit, length)
    for side_ax in [a for a in (ax, side) if a is not None]:
        side_ax.axhline(data.budget_bytes / unit, color="black", ls="--", lw=1)
    ax.text(0.01, data.budget_bytes / unit, f" budget {formatting.memory(data.budget_bytes)}",
            transform=ax.get_yaxis_transform(), va="bottom", fontsize=8)
    for label, side_data, marker in (("baseline", report.baseline, "s"), ("promoted", report.promoted, "*")):
        if side_data is not None and side_data.step_s and side_data.peak_bytes:
            ax.scatter([side_data.step_s], [side_data.peak_bytes / unit], marker=marker, s=140, facecolor="none",
                       edgecolor="black", zorder=4, label=f"{label} (re-verified)")
    if data.censored:
        ax.plot([], [], color=STATUS_COLORS["oom"], marker="$\\uparrow$", ls="", label="oom: peak above this")
    ax.set_xlabel("median step time (s)")
    ax.set_ylabel(f"peak memory ({unit_name})")
    ax.set_ylim(bottom, top + 2 * length)
    ax.set_title("Step time against peak memory; OOMs are censored (peak only known to exceed)", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    if side is not None:
        for i, c in enumerate(untimed):
            _arrow(side, i, c.level_bytes / unit, length)
            side.text(i, c.level_bytes / unit + 1.1 * length, f"#{c.number}", ha="center", va="bottom", fontsize=7)
        side.set_xlim(-1, len(untimed))
        side.set_xticks([])
        side.set_xlabel("oom, no step\ntimed", fontsize=8)
        side.tick_params(labelleft=False)
    return _save(fig, path)


def draw_prices(report: Report, path: Path) -> Path:
    prices = sorted(report.memory_prices, key=lambda p: p.pct)
    fig = Figure(figsize=(8, max(2.5, 0.3 * len(prices) + 1.2)))
    ax = fig.add_subplot()
    lows = [p.pct - 100 * math.expm1(p.log_effect - p.log_sd) for p in prices]
    highs = [100 * math.expm1(p.log_effect + p.log_sd) - p.pct for p in prices]
    colors = [STATUS_COLORS["ok"] if p.pct < 0 else STATUS_COLORS["oom"] for p in prices]
    ax.barh(range(len(prices)), [p.pct for p in prices], xerr=[lows, highs], color=colors, capsize=3)
    ax.set_yticks(range(len(prices)), [p.key for p in prices], fontsize=8)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel("change of peak memory against the baseline (%), ± 1 sd")
    ax.set_title("Memory price of each setting (censored Tobit fit, OOMs included)", fontsize=10)
    return _save(fig, path)


class _Times(LogFormatter):
    """Log-axis labels as multipliers (×0.5, ×2); minor ones only where the axis spans little."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        label = super().__call__(x, pos)
        return f"×{label}" if label else label


def draw_priors(report: Report, path: Path) -> Path:
    data = prior_plot_data(report)
    quantities = [q for q in ("time", "memory") if any(p.quantity == q for p in data)]
    rows = max(len([p for p in data if p.quantity == q]) for q in quantities)
    fig = Figure(figsize=(5.5 * len(quantities) + 1, max(2.5, 0.45 * rows + 1.4)), layout="constrained")
    for i, quantity in enumerate(quantities):
        ax = fig.add_subplot(1, len(quantities), i + 1)
        points = [p for p in data if p.quantity == quantity]
        for y, p in enumerate(points):
            mean, low, high = p.prior
            ax.errorbar([mean], [y + 0.15], xerr=[[mean - low], [high - mean]], fmt="o", mfc="white",
                        color=PRIOR, capsize=3)
            if p.observed is None:
                ax.text(mean, y - 0.15, "observed: no data", fontsize=7, ha="center", va="center", color=PRIOR)
                continue
            mean, low, high = p.observed
            color = MISCALIBRATED if p.miscalibrated else CALIBRATED
            ax.errorbar([mean], [y - 0.15], xerr=[[mean - low], [high - mean]], fmt="o", color=color, capsize=3)
        ax.errorbar([], [], fmt="o", mfc="white", color=PRIOR, label="prior")
        ax.errorbar([], [], fmt="o", color=CALIBRATED, label="observed")
        if any(p.miscalibrated for p in points):
            ax.errorbar([], [], fmt="o", color=MISCALIBRATED, label="observed: prior miscalibrated")
        ax.set_yticks(range(len(points)), [("✗ " if p.miscalibrated else "") + p.key for p in points], fontsize=8)
        for tick, p in zip(ax.get_yticklabels(), points, strict=False):
            if p.miscalibrated:
                tick.set_color(MISCALIBRATED)
        # The same row height in every panel, first setting on top.
        ax.set_ylim(rows - 0.5, -0.5)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(_Times(labelOnlyBase=False))
        ax.xaxis.set_minor_formatter(_Times(labelOnlyBase=False))
        ax.tick_params(axis="x", which="minor", labelsize=7)
        ax.axvline(1.0, color="black", lw=0.8)
        ax.set_xlabel(f"{'step time' if quantity == 'time' else 'peak memory'} × baseline, ± 1 sd")
        ax.set_title(f"Prior against observed: {quantity}", fontsize=10)
        ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def draw_all(report: Report, out_dir: Path) -> dict[str, Path]:
    """Every plot the report has data for, by name; a plot with nothing to show is not drawn."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plots: dict[str, Path] = {}
    if report.trials:
        plots["timeline"] = draw_timeline(report, out_dir / "timeline.png")
        plots["memory"] = draw_memory(report, out_dir / "memory.png")
    if report.memory_prices:
        plots["prices"] = draw_prices(report, out_dir / "prices.png")
    if prior_plot_data(report):
        plots["priors"] = draw_priors(report, out_dir / "priors.png")
    return plots
