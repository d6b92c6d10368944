"""The run stage's record: what the search and re-verification found, as ``.infrarsi/run.json``.

Plain values with their load/save: ``report``, ``apply``, the language server and the bank read it
without importing the stage that writes it (``infrarsi.stages.run``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from infrarsi.noise import PROMOTION_FLOOR
from infrarsi.records.disturbance import Disturbance
from infrarsi.records.files import run_path
from infrarsi.records.verdict import Verdict
from infrarsi.trials import TrialResult

RUN_SCHEMA_VERSION = 1
"""A run.json without the field was written before it had one: the same layout."""


class RunStatus(StrEnum):
    """How a run ended (a ``str``: run.json and comparisons with the plain words keep working)."""

    OK = "ok"
    """A candidate was promoted."""
    NO_PROMOTION = "no_promotion"
    SEARCHED = "searched"
    """The search ran and nothing was re-verified (``verify=False``)."""
    INTERRUPTED = "interrupted"
    ERROR = "error"


class RunRecordError(ValueError):
    """run.json was written by another version of InfraRSI."""


@dataclass(kw_only=True, slots=True)
class TrialRow:
    """One trial as the report lists it."""

    number: int
    kind: str
    status: str
    candidate: dict[str, Any]
    step_s: float | None
    job_s: float | None
    peak_bytes: int | None
    """The largest rank's."""
    wall_s: float
    detail: str
    reason: str = ""
    rank_peak_bytes: list[int] = field(default_factory=list)
    load_cores: float | None = None
    """Cores of the job's other processes used on average while its steps ran (runner/interference.py)."""
    rerun_of: int | None = None
    """The number of the disturbed trial this one reruns (experiment/quiet.py); its ``reason`` says so in words."""


@dataclass(kw_only=True, slots=True)
class PatchCheck:
    name: str
    status: str
    """validated | the failing trial's status | skipped."""
    reason: str
    cost_s: float


@dataclass(kw_only=True, slots=True)
class PriorCheckRow:
    """A prior against what the trials showed (``search.prior_check.PriorCheck.to_dict``)."""

    key: str
    """A setting key: ``knob=value`` or ``patch:name``."""
    quantity: str
    """time | memory"""
    prior: dict[str, Any] | None = None
    """The prior as ``Prior.to_dict`` writes it."""
    prior_mean: float
    """Log effect the prior expected, for this quantity."""
    prior_sd: float
    source: str = ""
    observed: float
    """Log effect the trials showed."""
    observed_sd: float
    z: float | None = None
    n_trials: int
    miscalibrated: bool


@dataclass(kw_only=True, slots=True)
class MemoryPriceRow:
    """The fitted change of the peak a setting costs (``search.memory_model.MemoryPrice``)."""

    key: str
    log_effect: float
    log_sd: float
    pct: float
    bytes_at_baseline: float


@dataclass(kw_only=True, slots=True)
class BankPriorRow:
    """A prior the experience bank contributed and what this run made of it."""

    key: str
    bank_mean: float
    bank_sd: float
    source: str
    used_mean: float
    used_sd: float
    observed: float | None
    observed_sd: float | None
    n_trials: int
    miscalibrated: bool
    outcome: str


_Row = TypeVar("_Row")


def _rows(cls: type[_Row], items: list[Any]) -> list[_Row]:
    return [item if isinstance(item, cls) else cls(**item) for item in items]


@dataclass(kw_only=True, slots=True)
class RunResult:
    status: RunStatus
    message: str
    run_id: str = ""
    sampler: str = ""
    storage_url: str = ""
    """The study's storage, its password hidden (``--storage`` gives it again to reopen it)."""
    study_name: str = ""
    sandbox: str = ""
    """How trials ran: ``bubblewrap`` or ``off (--no-sandbox)`` (see runner/sandbox.py)."""
    started: str = ""
    baseline: TrialResult | None = None
    """The baseline trial."""
    trials: list[TrialRow] = field(default_factory=list)
    patch_checks: list[PatchCheck] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    promoted: Verdict | None = None
    noise_floor: float = 1.0
    """Doctor's one-run floor: the smallest speedup a single trial against the baseline can trust."""
    promotion_floor: float = PROMOTION_FLOOR
    """What re-verification's interval must clear."""
    search_ended: str = ""
    """Why the search stopped asking for trials: its budget, or nothing left worth a trial."""
    spent_s: float = 0.0
    interrupted_s: float = 0.0
    prior_checks: list[PriorCheckRow] = field(default_factory=list)
    memory_prices: list[MemoryPriceRow] = field(default_factory=list)
    priors_source: str = ""
    bank_priors: list[BankPriorRow] = field(default_factory=list)
    """Each prior the experience bank contributed and what this run made of it
    (``Strategy.bank_outcomes``)."""
    disturbance: Disturbance | None = None
    """How much of the run other processes disturbed, what was rerun, how long it waited for quiet
    (``experiment.quiet.summary``); None (``{}`` in run.json) for a run that ended before its first trial."""
    schema_version: int = RUN_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdicts"] = [v.to_dict() for v in self.verdicts]
        data["promoted"] = self.promoted.to_dict() if self.promoted else None
        data["baseline"] = self.baseline.to_dict() if self.baseline else None
        data["disturbance"] = self.disturbance.to_dict() if self.disturbance else {}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        data = dict(data)
        version = data.setdefault("schema_version", RUN_SCHEMA_VERSION)
        if version != RUN_SCHEMA_VERSION:
            raise RunRecordError(f"run.json has schema {version!r}, this InfraRSI reads {RUN_SCHEMA_VERSION}; "
                                 "run `infrarsi run` again")
        data["status"] = RunStatus(data["status"])
        data["trials"] = [TrialRow(**t) for t in data.get("trials", [])]
        data["patch_checks"] = [PatchCheck(**p) for p in data.get("patch_checks", [])]
        data["verdicts"] = [Verdict.from_dict(v) for v in data.get("verdicts", [])]
        data["promoted"] = Verdict.from_dict(data["promoted"]) if data.get("promoted") else None
        data["baseline"] = TrialResult.from_dict(data["baseline"]) if data.get("baseline") else None
        data["prior_checks"] = _rows(PriorCheckRow, data.get("prior_checks", []))
        data["memory_prices"] = _rows(MemoryPriceRow, data.get("memory_prices", []))
        data["bank_priors"] = _rows(BankPriorRow, data.get("bank_priors", []))
        data["disturbance"] = Disturbance.from_dict(data["disturbance"]) if data.get("disturbance") else None
        return cls(**data)


def save_run(result: RunResult, repo: Path) -> Path:
    path = run_path(repo)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result.to_dict(), indent=2, default=str))
    tmp.replace(path)
    return path


def load_run(repo: Path) -> RunResult | None:
    path = run_path(repo)
    return RunResult.from_dict(json.loads(path.read_text())) if path.exists() else None
