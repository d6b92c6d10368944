"""What one trial is given and what it returns: values, never exceptions."""

from __future__ import annotations

import enum
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from infrarsi.contract import KnobValue
from infrarsi.hunk import Hunk


class TrialStatus(str, enum.Enum):  # noqa: UP042 -- StrEnum changes str()/f-strings (TrialStatus.OK -> ok)
    OK = "ok"
    OOM = "oom"
    TIMEOUT = "timeout"
    ABORTED_SLOW = "aborted_slow"
    CRASH = "crash"
    NUMERICS = "numerics"
    CONTRACT = "contract"
    DISTURBED = "disturbed"
    """Other processes took the job's machine beyond doctor's normal background
    (runner/interference.py): not evidence about the candidate; rerun, never told to the models."""

    @property
    def deterministic(self) -> bool:
        """Failures that repeat on a rerun of the same candidate (never retried)."""
        return self in (TrialStatus.OOM, TrialStatus.CRASH, TrialStatus.NUMERICS, TrialStatus.CONTRACT)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One configuration of the job: knob values (by knob name) and the patches applied."""

    knobs: dict[str, KnobValue] = field(default_factory=dict)
    patches: tuple[str, ...] = ()

    def key(self) -> str:
        """A stable identity, for deduplication and storage."""
        knobs = ",".join(f"{k}={self.knobs[k]!r}" for k in sorted(self.knobs))
        return f"{knobs}|{'+'.join(sorted(self.patches))}"

    def to_dict(self) -> dict[str, Any]:
        return {"knobs": dict(self.knobs), "patches": list(self.patches)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        return cls(knobs=dict(data.get("knobs", {})), patches=tuple(data.get("patches", ())))


@dataclass(slots=True)
class TrialResult:
    status: TrialStatus
    candidate: Candidate
    step_times: list[float] = field(default_factory=list)
    """Seconds per measured step (warm-up steps excluded)."""
    warmup_times: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    """Loss of every step run, warm-up included."""
    tokens_per_step: int | None = None
    """All ranks' tokens per step, counted by the launcher (None: the job's inputs are not tokens)."""
    samples_per_step: int | None = None
    """All ranks' samples per step (sequences, images…), counted by the launcher."""
    flops_per_step: float | None = None
    """All ranks' FLOPs in one step (forward, backward, optimizer), from ``flops_source``."""
    flops_source: str = ""
    """FlopCounterMode (counted on a warm-up step) | 6N+12LHQT (doctor's cross-check from the probe's
    model facts) | "" (unknown)."""
    param_checksum: list[float] | None = None
    """[sum, sum of squares] in float64 over rank 0's optimized parameters after the last step,
    computed in InfraRSI's process from the file the launcher wrote."""
    source: str = ""
    """Who measured the steps: launcher (InfraRSI's clock, from outside the job) | "" (no step)."""
    peak_bytes: int | None = None
    """Peak memory of the largest rank: its process tree's RSS on CPU, the probe's max allocated
    on CUDA."""
    rank_peak_bytes: list[int] = field(default_factory=list)
    """On CPU, each rank's peak RSS by local rank (one entry for a plain script)."""
    startup_s: float | None = None
    """Launch to the end of the first step, minus that step's own time."""
    process_s: float | None = None
    """Launch to the exit of the launched process by InfraRSI's clock, when it exited by itself
    after InfraRSI told it to stop: the whole-process time verification decides on."""
    stopped_s: float | None = None
    """Launch to the moment InfraRSI told the last of the job's stepping processes to stop."""
    steps_run: int = 0
    """Steps the run made (warm-up included)."""
    steps_per_epoch: int | None = None
    """Steps in one pass over the training loader, as the launcher counted them (None: unknown)."""
    wall_s: float = 0.0
    """The trial's whole cost in seconds."""
    phases: dict[str, float] = field(default_factory=dict)
    """Mean seconds per measured step in each probe phase (when the script uses the probe)."""
    model_facts: dict[str, int] = field(default_factory=dict)
    detail: str = ""
    """Why it ended this way: the error's last lines, the level an OOM was seen at…"""
    log_path: str = ""
    probe_path: str = ""
    """The launcher's records as they arrived (records.jsonl), probe records included."""
    hunks: list[Hunk] = field(default_factory=list)
    """Exactly what the candidate changed in the source."""
    interference: dict[str, Any] = field(default_factory=dict)
    """Who else used the machine, per step and over start-up (``interference.TrialInterference.to_dict``)."""

    @property
    def ok(self) -> bool:
        return self.status is TrialStatus.OK

    @property
    def step_time(self) -> float | None:
        """Median measured step time."""
        return statistics.median(self.step_times) if self.step_times else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        data["candidate"] = self.candidate.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        data = dict(data)
        data["status"] = TrialStatus(data["status"])
        data["candidate"] = Candidate.from_dict(data["candidate"])
        data["hunks"] = [Hunk(**h) for h in data.get("hunks", [])]
        return cls(**data)
