"""What the search needs from a prior provider: one prior effect per setting.

A setting is one knob value or one patch, keyed ``"knob=value"`` (``str(value)``, so
``"compile=True"``, ``"micro_batch=4"``, ``"dtype=bfloat16"``) or ``"patch:name"``. Effects are
natural-log multipliers relative to the baseline (the knob's default, the patch off): a prior of
``time_log_mean = log(0.5)`` says "this setting halves the step time".
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Prior:
    time_log_mean: float
    """Expected log change of the step time against the baseline."""
    time_log_sd: float
    """How sure the source is, in the same log units (one standard deviation)."""
    mem_log_mean: float
    """Expected log change of the peak memory against the baseline."""
    mem_log_sd: float
    source: str = ""
    """Who said so: ``builtin``, ``llm:<model>``, ``bank:<study>``…"""

    def __post_init__(self) -> None:
        if not (self.time_log_sd > 0 and self.mem_log_sd > 0):
            raise ValueError(f"prior sds must be positive, got {self.time_log_sd}, {self.mem_log_sd}")


@dataclass(slots=True)
class PriorTable:
    """Setting key -> prior; settings without an entry get no prior (effect 0, wide)."""

    entries: dict[str, Prior] = field(default_factory=dict)

    def get(self, key: str) -> Prior | None:
        return self.entries.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def __len__(self) -> int:
        return len(self.entries)
