"""What a run concluded: ``conclusion.conclude`` returns it, and the worker that verified a shared
round stores it on its claim for the others (``store.TrialStore.settle``, ``shared_round``).

A module of its own because the store, below the conclusion, reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infrarsi.records import RunStatus, Verdict


@dataclass(frozen=True, slots=True)
class Conclusion:
    """How the run ended and what re-verification judged."""

    status: RunStatus
    message: str
    verdicts: tuple[Verdict, ...] = ()
    promoted: Verdict | None = None
    elsewhere: int | None = None
    """The study trial of the worker that verified this shared round, when another did (None: this
    worker did, or nothing was verified). Not stored: it says who read the conclusion, not what it is."""

    def to_dict(self) -> dict[str, Any]:
        """As a claim stores it."""
        return {"status": self.status.value, "message": self.message, "verdicts": [v.to_dict() for v in self.verdicts],
                "promoted": self.promoted.to_dict() if self.promoted else None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Conclusion:
        return cls(status=RunStatus(data["status"]), message=data["message"],
                   verdicts=tuple(Verdict.from_dict(v) for v in data["verdicts"]),
                   promoted=Verdict.from_dict(data["promoted"]) if data["promoted"] else None)
