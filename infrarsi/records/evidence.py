"""What a commit made by ``apply`` was promoted on, kept beside the commit as a git note.

``verify`` reads it back to say whether the recorded speed-up still holds; the commit message
says the same for people, but nothing parses it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from infrarsi.records.run import RunResult
from infrarsi.records.verdict import Verdict

NOTES_REF = "refs/notes/infrarsi"
EVIDENCE_SCHEMA_VERSION = 1


@dataclass(kw_only=True, slots=True)
class CommitEvidence:
    run_id: str
    candidate: dict[str, Any]
    job_speedup: tuple[float, float, float]
    """(point, 95% low, 95% high) of baseline job time over the candidate's, from re-verification."""
    promotion_floor: float
    rounds: int
    cand_job_s: list[float] = field(default_factory=list)
    base_job_s: list[float] = field(default_factory=list)
    schema_version: int = EVIDENCE_SCHEMA_VERSION

    @classmethod
    def of(cls, run: RunResult, verdict: Verdict) -> CommitEvidence:
        return cls(run_id=run.run_id, candidate=verdict.candidate.to_dict(),
                   job_speedup=verdict.job_speedup or (float("nan"),) * 3, promotion_floor=run.promotion_floor,
                   rounds=len(verdict.cand_job_s), cand_job_s=list(verdict.cand_job_s),
                   base_job_s=list(verdict.base_job_s))

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> CommitEvidence | None:
        """The note's evidence; None when the note is not one this version of InfraRSI wrote."""
        try:
            data = json.loads(text)
            if data.get("schema_version") != EVIDENCE_SCHEMA_VERSION:
                return None
            data["job_speedup"] = tuple(float(x) for x in data["job_speedup"])
            return cls(**data)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
