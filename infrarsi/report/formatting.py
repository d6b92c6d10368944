"""How the report writes its numbers, shared by Markdown, HTML and the terminal."""

from __future__ import annotations

from infrarsi.byte_units import GIB, MIB


def seconds(value: float | None) -> str:
    if value is None:
        return "–"
    if value < 1:
        return f"{value * 1000:.1f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"


def memory(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value / GIB:.2f} GiB" if abs(value) >= GIB else f"{value / MIB:.0f} MiB"


def ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}×"


def interval(values: tuple[float, float, float] | None) -> str:
    """A speedup with its 95% confidence interval."""
    if values is None:
        return "–"
    point, low, high = values
    return f"{point:.3f}× [{low:.3f}, {high:.3f}]"


def percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def rate(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"
