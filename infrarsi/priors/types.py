"""Prior effects of settings and patches, and what a prior provider is given and returns.

An effect is a natural-log multiplicative factor relative to the baseline (the contract's
defaults, no patches): ``time_log_mean = log(0.8)`` means "20% less step time". The sd is the
confidence: about 68% of the belief lies within one sd of the mean, in log units. The search
adds the effects of a candidate's settings and patches in log space.

Keys name what the effect belongs to, resolved per contract: ``"<knob name>=<value>"`` (the
knob's name in the contract, the value as ``str`` writes it) and
``"patch:<patch name>"``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from infrarsi.contract import Contract, KnobValue
from infrarsi.records.doctor import DoctorReport
from infrarsi.settings import patch_key, setting_key

if TYPE_CHECKING:  # importing it imports torch (~2 s); the priors only read its fields
    from infrarsi.records.hardware import HardwareFingerprint

NEUTRAL_TIME_SD = 1.0
NEUTRAL_MEM_SD = 1.0
"""A key nobody has a belief about: no effect expected, anything within about e-fold either way."""
BASELINE_SD = 0.005
"""The baseline setting's effect is zero by definition; sd must stay > 0 for the models."""
MAX_ABS_LOG = math.log(50.0)
"""No single setting or patch is believed to change time or memory by more than 50×."""
MAX_SD = 3.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Prior:
    key: str
    time_log_mean: float
    time_log_sd: float
    mem_log_mean: float
    mem_log_sd: float
    source: str
    """Where the belief comes from: a paper, documentation, a measurement note, a model, a bank run."""
    startup_s: float = 0.0
    """Expected one-time start-up cost in seconds (compilation): amortized over the planned steps."""
    mem_part: str = ""
    """The part of the peak the setting scales, "state" or "activations"; "" for the whole peak
    (``infrarsi.priors.memory_parts``)."""
    mem_part_log_mean: float = 0.0
    mem_part_log_sd: float = 0.0
    """The log effect on that part alone, which the search's memory model adds to the other part."""
    mem_part_shared_sd: float = 0.0
    """Of ``mem_part_log_sd``, what every value of the knob shares (the baseline's own level, which
    each is measured against): a trial of one value teaches the others that much."""

    def __post_init__(self) -> None:
        for name in ("time_log_mean", "mem_log_mean"):
            value = getattr(self, name)
            if not (math.isfinite(value) and abs(value) <= MAX_ABS_LOG):
                raise ValueError(f"prior {self.key!r}: {name}={value!r} must be finite and within ±{MAX_ABS_LOG:.2f}")
        for name in ("time_log_sd", "mem_log_sd"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= MAX_SD):
                raise ValueError(f"prior {self.key!r}: {name}={value!r} must be in (0, {MAX_SD}]")
        if not (math.isfinite(self.startup_s) and self.startup_s >= 0):
            raise ValueError(f"prior {self.key!r}: startup_s={self.startup_s!r} must be finite and >= 0")
        if self.mem_part not in ("", "state", "activations"):
            raise ValueError(f"prior {self.key!r}: mem_part={self.mem_part!r} must be '', 'state' or 'activations'")
        if self.mem_part and not (abs(self.mem_part_log_mean) <= MAX_ABS_LOG and 0 < self.mem_part_log_sd <= MAX_SD):
            raise ValueError(f"prior {self.key!r}: the part's log effect must be within ±{MAX_ABS_LOG:.2f}, "
                             f"its sd in (0, {MAX_SD}]")
        if not 0 <= self.mem_part_shared_sd <= self.mem_part_log_sd:
            raise ValueError(f"prior {self.key!r}: mem_part_shared_sd={self.mem_part_shared_sd!r} must be in "
                             f"[0, mem_part_log_sd]")

    @property
    def time_factor(self) -> float:
        return math.exp(self.time_log_mean)

    @property
    def mem_factor(self) -> float:
        return math.exp(self.mem_log_mean)

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Prior:
        return cls(**{f: data[f] for f in cls.__dataclass_fields__ if f in data})


def neutral_prior(key: str) -> Prior:
    return Prior(key=key, time_log_mean=0.0, time_log_sd=NEUTRAL_TIME_SD, mem_log_mean=0.0,
                 mem_log_sd=NEUTRAL_MEM_SD, source="neutral: no prior known for this key")


@dataclass(frozen=True, slots=True)
class PriorTable:
    """Priors by key; :meth:`get` answers every key, with a neutral wide prior for unknown ones."""

    entries: Mapping[str, Prior] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, prior in self.entries.items():
            if prior.key != key:
                raise ValueError(f"prior table: entry {key!r} holds the prior for {prior.key!r}")

    @classmethod
    def of(cls, priors: list[Prior] | tuple[Prior, ...]) -> PriorTable:
        return cls({p.key: p for p in priors})

    def get(self, key: str) -> Prior:
        """The prior for ``key``; neutral and wide when no source had one (``key in table`` says which)."""
        return self.entries.get(key) or neutral_prior(key)

    def __contains__(self, key: object) -> bool:
        return key in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def merged(self, other: PriorTable) -> PriorTable:
        """This table with ``other``'s entries taking precedence, quantity by quantity: where
        ``other`` holds no belief (a neutral sd, no start-up seconds), this table's stays. A bank
        that measured only step times must not erase what the table knows about memory."""
        entries = dict(self.entries)
        for key, new in other.entries.items():
            old = entries.get(key)
            if old is None:
                entries[key] = new
                continue
            keep_time = new.time_log_sd >= NEUTRAL_TIME_SD
            keep_mem = new.mem_log_sd >= NEUTRAL_MEM_SD
            kept_any = keep_time or keep_mem or bool(old.startup_s and not new.startup_s)
            entries[key] = Prior(
                key=key,
                time_log_mean=old.time_log_mean if keep_time else new.time_log_mean,
                time_log_sd=old.time_log_sd if keep_time else new.time_log_sd,
                mem_log_mean=old.mem_log_mean if keep_mem else new.mem_log_mean,
                mem_log_sd=old.mem_log_sd if keep_mem else new.mem_log_sd,
                startup_s=new.startup_s or old.startup_s,
                source=new.source + (f"; otherwise {old.source}" if kept_any else ""),
                **_part_of(new, old),
            )
        return PriorTable(entries)

    def combined(self, evidence: PriorTable) -> PriorTable:
        """This table updated by ``evidence`` (the experience bank's measured effects), quantity by
        quantity: a precision-weighted mean of belief and measurement, as Bayes has two Gaussians
        combine. A past measurement read no surer than its trials then moves a belief only as far
        as it deserves, where ``merged`` would have replaced it (one disturbed trial saying 12x
        slower outvoted every source). Where ``evidence`` holds no belief (a neutral sd) this
        table's stays; keys only ``evidence`` knows are taken as they are."""
        entries = dict(self.entries)
        for key, new in evidence.entries.items():
            old = entries.get(key)
            if old is None:
                entries[key] = new
                continue
            time = _product(old.time_log_mean, old.time_log_sd, new.time_log_mean, new.time_log_sd, NEUTRAL_TIME_SD)
            mem = _product(old.mem_log_mean, old.mem_log_sd, new.mem_log_mean, new.mem_log_sd, NEUTRAL_MEM_SD)
            entries[key] = Prior(key=key, time_log_mean=time[0], time_log_sd=time[1], mem_log_mean=mem[0],
                                 mem_log_sd=mem[1], startup_s=new.startup_s or old.startup_s, **_part_of(new, old),
                                 source=f"{new.source}; combined with {old.source}")
        return PriorTable(entries)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {k: p.to_dict() for k, p in self.entries.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, Any]]) -> PriorTable:
        return cls({k: Prior.from_dict(v) for k, v in data.items()})


def _part_of(new: Prior, old: Prior) -> dict[str, Any]:
    """The part of the peak ``new`` scales, or ``old``'s where ``new`` (a bank's measured whole-peak
    effect, a model's answer) names none."""
    source = new if new.mem_part else old
    return {"mem_part": source.mem_part, "mem_part_log_mean": source.mem_part_log_mean,
            "mem_part_log_sd": source.mem_part_log_sd, "mem_part_shared_sd": source.mem_part_shared_sd}


def _product(mean: float, sd: float, new_mean: float, new_sd: float, neutral: float) -> tuple[float, float]:
    """Two Gaussian beliefs about one log effect, combined; a neutral ``new_sd`` leaves the first."""
    if new_sd >= neutral:
        return mean, sd
    w, w_new = sd**-2, new_sd**-2
    return (w * mean + w_new * new_mean) / (w + w_new), (w + w_new) ** -0.5


@dataclass(frozen=True, kw_only=True, slots=True)
class PriorContext:
    """Everything a provider may use to form its beliefs."""

    contract: Contract
    hardware: HardwareFingerprint
    doctor: DoctorReport | None = None
    """Doctor's report, when doctor has run."""
    sources: Mapping[str, str] = field(default_factory=dict)
    """Editable source files: repo-relative path -> text."""
    patches: Mapping[str, Prior | None] = field(default_factory=dict)
    """Patches that may be applied: name -> the prior the patch declares, if any."""

    def keys(self) -> list[str]:
        """Every key the search can ask about: each tunable knob's domain values, each patch."""
        keys = [setting_key(k.name, v) for k in self.contract.tunable for v in _with_default(k.domain, k.default)]
        return keys + [patch_key(p) for p in self.patches]


def _with_default(domain: list[KnobValue], default: KnobValue) -> list[KnobValue]:
    return domain if default in domain else [default, *domain]


class PriorStatus(enum.StrEnum):
    OK = "ok"
    ERROR = "error"


@dataclass(frozen=True, kw_only=True, slots=True)
class PriorResult:
    """A provider's answer. On ERROR ``table`` is the built-in fallback, never empty-handed."""

    status: PriorStatus
    table: PriorTable
    provider: str
    """Who produced ``table``: ``builtin`` or ``anthropic:<model>``."""
    reason: str = ""
    """On ERROR, machine-readable: not_configured | timeout | rate_limited | connection | api_error | malformed."""
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PriorStatus.OK


class PriorProvider(Protocol):
    """Where priors come from. Implementations never raise for a failed source: they return
    an ERROR result carrying the built-in table and the reason."""

    def priors(self, context: PriorContext) -> PriorResult: ...
