"""Re-verification's verdict on one candidate against the baseline, as the run record keeps it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from infrarsi.runner.result import Candidate


@dataclass(kw_only=True, slots=True)
class Verdict:
    candidate: Candidate
    promoted: bool
    reason: str
    job_speedup: tuple[float, float, float] | None = None
    """(point, low, high) of baseline job time over candidate job time."""
    step_speedup: tuple[float, float, float] | None = None
    base_step_s: list[float] = field(default_factory=list)
    """Median step time of each baseline rerun."""
    cand_step_s: list[float] = field(default_factory=list)
    base_job_s: list[float] = field(default_factory=list)
    cand_job_s: list[float] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    max_loss_diff: float | None = None
    """Largest |candidate loss - baseline loss| over compared steps and reruns."""
    peak_bytes: int | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["candidate"] = self.candidate.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Verdict:
        data = dict(data)
        data["candidate"] = Candidate.from_dict(data["candidate"])
        for key in ("job_speedup", "step_speedup"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return cls(**data)
