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


def ignore(_: Event) -> None:
    """The sink for callers that want no progress."""
