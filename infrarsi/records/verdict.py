"""Re-verification's verdict on one candidate against the baseline, as the run record keeps it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from infrarsi.trials import Candidate


@dataclass(kw_only=True, slots=True)
class Verdict:
    candidate: Candidate
    promoted: bool
    reason: str
    job_speedup: tuple[float, float, float] | None = None
    """(point, low, high) of baseline job time over candidate job time, both from whole processes
    (infrarsi/whole_process.py): what decides."""
    step_speedup: tuple[float, float, float] | None = None
    """The same for the time per step, from whole processes."""
    record_step_speedup: tuple[float, float, float] | None = None
    """The per-step speed-up the job's own step records tell (the mean measured step of each long
    run): shown beside the whole-process one, never deciding."""
    contract: str = ""
    """Why the candidate breached the contract in verification (its records disagree with its wall
    time); empty when it did not."""
    base_step_s: list[float] = field(default_factory=list)
    """Whole-process seconds per step of each baseline round."""
    cand_step_s: list[float] = field(default_factory=list)
    base_job_s: list[float] = field(default_factory=list)
    """Whole-process projected job seconds of each baseline round."""
    cand_job_s: list[float] = field(default_factory=list)
    base_record_step_s: list[float] = field(default_factory=list)
    """Mean measured step of each baseline round's long run, by the step records."""
    cand_record_step_s: list[float] = field(default_factory=list)
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
        for key in ("job_speedup", "step_speedup", "record_step_speedup"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return cls(**data)
