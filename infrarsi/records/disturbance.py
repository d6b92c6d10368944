"""How much of a run other processes disturbed (``RunResult.disturbance``): written by
``experiment/quiet.py``, said in words by ``report/disturbance.py``.

Each value writes the JSON run.json has always held; a record written before a field existed
reads with the value the report assumed for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infrarsi.background import Background


@dataclass(frozen=True, kw_only=True, slots=True)
class RerunRow:
    """One rerun of a disturbed trial."""

    trial: int
    of: int
    """The number of the disturbed trial it reruns."""
    kind: str
    candidate: dict[str, Any]
    """As its ``TrialRow`` has it."""
    status: str
    of_detail: str
    """The disturbed trial's detail: why it was disturbed."""

    def to_dict(self) -> dict[str, Any]:
        return {"trial": self.trial, "of": self.of, "kind": self.kind, "candidate": self.candidate,
                "status": self.status, "of_detail": self.of_detail}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RerunRow:
        return cls(**data)


@dataclass(frozen=True, kw_only=True, slots=True)
class Renormalization:
    """The machine's normal measured again after a disturbance outlasted a rerun
    (experiment/session.py ``TrialSession._renormalize``)."""

    after_trial: int
    """The rerun that stayed disturbed."""
    trial: int
    """The baseline trial that measured the normal."""
    stopped: bool
    """The baseline ran so much slower that the run stopped there."""
    failed: str = ""
    """Why the measure failed (the normal stayed doctor's); empty when it was measured."""
    background: Background | None = None
    """The new normal; None when the measure failed."""
    slowdown: float = 1.0
    """The baseline's step time against its first, at the new normal."""

    def to_dict(self) -> dict[str, Any]:
        head = {"after_trial": self.after_trial, "trial": self.trial, "stopped": self.stopped}
        if self.background is None:
            return {**head, "failed": self.failed}
        return {**head, "background": self.background.to_dict(), "slowdown": self.slowdown}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Renormalization:
        background = data.get("background")
        return cls(after_trial=data["after_trial"], trial=data["trial"], stopped=data["stopped"],
                   failed=data.get("failed", ""), slowdown=data.get("slowdown", 1.0),
                   background=Background.from_dict(background) if background is not None else None)


@dataclass(frozen=True, kw_only=True, slots=True)
class Disturbance:
    """What other processes disturbed, what was rerun, how long the run waited for quiet."""

    trials: int
    """Trials that ended disturbed."""
    of_trials: int
    seconds: float
    """Their cost."""
    share: float
    """Their share of the run's trial time."""
    reruns: tuple[RerunRow, ...]
    waited_s: float
    background: Background
    """The normal the run began with (doctor's)."""
    max_reruns: int
    renormalized: tuple[Renormalization, ...]
    unresolved: tuple[int, ...]
    """Disturbed trials no rerun repeated (still disturbed after ``max_reruns``)."""

    def to_dict(self) -> dict[str, Any]:
        return {"trials": self.trials, "of_trials": self.of_trials, "seconds": self.seconds, "share": self.share,
                "reruns": [r.to_dict() for r in self.reruns], "waited_s": self.waited_s,
                "background": self.background.to_dict(), "max_reruns": self.max_reruns,
                "renormalized": [r.to_dict() for r in self.renormalized], "unresolved": list(self.unresolved)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Disturbance:
        return cls(trials=data["trials"], of_trials=data["of_trials"], seconds=data["seconds"], share=data["share"],
                   reruns=tuple(RerunRow.from_dict(r) for r in data["reruns"]), waited_s=data.get("waited_s", 0.0),
                   background=Background.from_dict(data["background"]), max_reruns=data.get("max_reruns", 2),
                   renormalized=tuple(Renormalization.from_dict(r) for r in data.get("renormalized", [])),
                   unresolved=tuple(data["unresolved"]))
