"""The machine's normal background and one window's interference: the records doctor and each
trial keep, and the rule that calls a window disturbed. ``runner/interference.py`` measures them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

MARGIN_CORES = 0.3
"""Other processes may use this many cores more than doctor's normal before a window is disturbed:
above the jiffy resolution over a short step and the harness's own wobble."""
MIN_LIMIT_CORES = 0.4
"""Also the limit when doctor measured no background (a doctor.json older than this measure)."""
BUSY_CORES = 0.5
"""A machine whose other processes use more than this many cores (or a quarter of the job's, when
more) while nothing of InfraRSI runs is too busy to measure on."""
SLOWER = 1.2
"""How much longer than doctor's normal the job's CPU work may take from waiting for a CPU (the CPU
it got over its runnable time, against the normal share) before a window is disturbed."""
MIN_OTHERS_CORES = 0.25
"""Waiting counts as disturbance only while other processes use at least this many of the job's cores,
and more than their normal (``Background.normal_cores``): under a background that is the normal, a
candidate that waits more than the baseline did (more threads against the same load) is slower on
this machine, which is its measurement, not a disturbance."""
GPU_LIMIT = 0.10
"""Other processes' SM utilisation of the job's devices above which a window is disturbed."""


@dataclass(frozen=True, slots=True)
class Window:
    """Interference over one interval of a trial."""

    seconds: float
    others_cores: float
    """Cores' worth of the job's cores other processes used on average."""
    steal_cores: float
    job_share: float
    """CPU the job's tree got over what its threads could use (threads, at most the cores, × wall)."""
    denied: float
    """The share of the job's runnable time it spent waiting for a CPU."""
    gpu_others: float | None = None
    job_cores: float = 0.0
    """Cores' worth of CPU the job's tree used on average (what a thread count changes)."""

    @property
    def load_cores(self) -> float:
        return self.others_cores + self.steal_cores

    def disturbed(self, limits: Background) -> bool:
        return (self.load_cores > limits.limit_cores or self._waited(limits)
                or (self.gpu_others or 0.0) > GPU_LIMIT)

    def _waited(self, limits: Background) -> bool:
        return (self.denied > limits.limit_denied and self.load_cores >= MIN_OTHERS_CORES
                and self.load_cores > limits.normal_cores)

    def why(self, limits: Background) -> str:
        if self.load_cores > limits.limit_cores:
            return f"other processes used {self.load_cores:.2f} of the job's cores (normal at most {limits.limit_cores:.2f})"
        if (self.gpu_others or 0.0) > GPU_LIMIT:
            return f"other processes used {self.gpu_others:.0%} of the job's GPUs"
        return (f"the job waited for a CPU {self.denied:.0%} of its runnable time (normal at most "
                f"{limits.limit_denied:.0%}) while other processes used {self.load_cores:.2f} of its cores, "
                f"more than their normal {limits.normal_cores:.2f}")

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass(kw_only=True, slots=True)
class Background:
    """The machine's normal background, as doctor measured it (``DoctorReport.background``)."""

    cores: int
    """Cores the job may run on."""
    idle_cores: float
    """Other processes' use of those cores (steal included) sampled while nothing of InfraRSI ran."""
    normal_cores: float
    """The 90th percentile of other processes' use over the baseline runs' steps."""
    limit_cores: float
    """Above this a window is disturbed: ``max(normal + MARGIN_CORES, MIN_LIMIT_CORES)``."""
    normal_denied: float = 0.0
    """The 90th percentile of the share of its runnable time the baseline waited for a CPU."""
    limit_denied: float = 1 - 1 / SLOWER
    """``1 - (1 - normal_denied) / SLOWER``: waiting beyond it stretches the job's CPU work by more than
    ``SLOWER`` against normal (on a quiet machine about 17% of its runnable time)."""
    busy: bool
    """The idle sample said the machine was too busy to measure on."""
    waited_s: float = 0.0
    """How long doctor waited for quiet before measuring (``--wait-for-quiet``)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Background:
        return cls(**data)

    @classmethod
    def unmeasured(cls, cores: int) -> Background:
        """The limits when doctor measured no background (a doctor.json older than this measure)."""
        return cls(cores=cores, idle_cores=0.0, normal_cores=0.0, limit_cores=MIN_LIMIT_CORES, busy=False)


def busy_limit(cores: int) -> float:
    return max(BUSY_CORES, 0.25 * cores)


def _p90(values: list[float], default: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(0.9 * len(values)))] if values else default


def background(cores: int, idle_cores: float, windows: Iterable[Window], waited_s: float = 0.0) -> Background:
    """The normal background from the idle sample and the baseline's measured steps."""
    windows = list(windows)
    # The limit is taken from the rounded normal, so the two recorded numbers keep their margin.
    normal = round(_p90([idle_cores, *(w.load_cores for w in windows)], idle_cores), 3)
    denied = _p90([w.denied for w in windows], 0.0)
    return Background(cores=cores, idle_cores=round(idle_cores, 3), normal_cores=normal,
                      limit_cores=round(max(normal + MARGIN_CORES, MIN_LIMIT_CORES), 3),
                      normal_denied=round(denied, 3), limit_denied=round(1 - (1 - denied) / SLOWER, 3),
                      busy=idle_cores > busy_limit(cores), waited_s=round(waited_s, 1))
