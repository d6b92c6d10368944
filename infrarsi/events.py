"""Progress events: stages report through a sink; the CLI renders them with rich, the server as LSP progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Event:
    stage: str
    """init | doctor | run | report | apply | verify | trial."""
    kind: str
    """begin | report | end | log."""
    message: str = ""
    done: int | None = None
    total: int | None = None
    data: dict[str, Any] = field(default_factory=dict)


EventSink = Callable[[Event], None]


def clock(seconds: float) -> str:
    """A duration as a person says it: ``40 s``, ``1 min 40 s``, ``2 h 5 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def ignore(_: Event) -> None:
    """The sink for callers that want no progress."""
