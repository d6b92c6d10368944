"""What ``infrarsi bank show`` and ``infrarsi bank forget`` do: the user's view of the bank.

``show`` lists every run and its findings (each with the sd the bank reads it with today, and the
id ``forget`` takes); given a workload (a repository with a contract), only the runs alike enough
to be used for it and the priors it would get. ``forget`` deletes one finding, every finding of a
setting, one run, or every run before a date. Both return values with a status, never raise for
bad input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from infrarsi.bank.signature import WorkloadSignature
from infrarsi.bank.store import MIN_SIMILARITY, ExperienceBank, Forgotten, StoredRun, resolve_url
from infrarsi.contract import ContractError, load_contract
from infrarsi.priors import PriorContext, builtin_table
from infrarsi.records import load_doctor


@dataclass(kw_only=True, slots=True)
class WorkloadView:
    """What the bank holds for one workload."""

    repo: str
    signature: str
    hardware_id: str
    similarity: dict[str, float]
    """Run id -> workload similarity, for the runs alike enough to be used."""
    priors: list[dict[str, Any]]
    """The priors it would get: key, factor, low, high (± 1 sd), sd, source."""


@dataclass(kw_only=True, slots=True)
class ShowResult:
    status: str
    """ok | error."""
    message: str
    url: str = ""
    runs: list[StoredRun] = field(default_factory=list)
    workload: WorkloadView | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "message": self.message, "url": _safe(self.url),
            "runs": [{"id": r.id, "signature": r.signature, "hardware_id": r.hardware_id, "hardware": r.hardware,
                      "recorded_at": r.recorded_at.isoformat(), "verdicts": [list(v) for v in r.verdicts],
                      "best": [{"candidate": c, "speedup": s} for c, s in r.best],
                      "effects": [{"id": e.id, "key": e.key, "baseline": e.baseline, "factor": math.exp(e.time_log),
                                   "time_log": e.time_log, "time_sd": e.time_sd, "trusted_sd": e.trusted_sd,
                                   "n": e.n, "noise_cv": e.noise_cv} for e in r.effects]}
                     for r in self.runs],
            "workload": None if self.workload is None else {
                "repo": self.workload.repo, "signature": self.workload.signature,
                "hardware_id": self.workload.hardware_id, "similarity": self.workload.similarity,
                "priors": self.workload.priors},
        }


@dataclass(kw_only=True, slots=True)
class ForgetResult:
    status: str
    """ok | not_found (nothing matched) | error."""
    message: str
    forgotten: Forgotten | None = None

    def to_dict(self) -> dict[str, Any]:
        counts = None if self.forgotten is None else {
            "runs": self.forgotten.runs, "effects": self.forgotten.effects,
            "verdicts": self.forgotten.verdicts, "best": self.forgotten.best}
        return {"status": self.status, "message": self.message, "forgotten": counts}


def _safe(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True) if url else url


def _open(url: str | None) -> tuple[ExperienceBank | None, str]:
    try:
        return ExperienceBank(url), ""
    except Exception as error:  # a bad URL, an unreachable server: one line, not a traceback
        return None, f"cannot open the experience bank at {_safe(resolve_url(url))}: {str(error).splitlines()[0]}"


def _workload(bank: ExperienceBank, repo: Path) -> WorkloadView:
    """The signature and hardware a run in ``repo`` would read the bank with (as ``make_strategy``)."""

    contract = load_contract(repo)
    doctor = load_doctor(repo)
    if doctor is not None:
        hardware = doctor.hardware
    else:  # before doctor: this machine, as doctor would fingerprint it
        from infrarsi.hardware import fingerprint

        hardware = fingerprint()
    signature = WorkloadSignature.from_contract(contract, doctor.model_facts if doctor is not None else {})
    similarity = bank.similar_runs(signature)
    # Re-based, as a run re-bases them, on its built-in priors (a run adds any patches' and LLM's).
    own = builtin_table(PriorContext(contract=contract, hardware=hardware))
    table = bank.priors_for(signature, hardware.id, baselines=contract.defaults(), reference=own)
    priors = [{"key": k, "factor": p.time_factor, "low": math.exp(p.time_log_mean - p.time_log_sd),
               "high": math.exp(p.time_log_mean + p.time_log_sd), "sd": p.time_log_sd, "source": p.source}
              for k, p in sorted(table.entries.items())]
    return WorkloadView(repo=str(repo), signature=signature.key, hardware_id=hardware.id, similarity=similarity,
                        priors=priors)


def show(url: str | None = None, *, workload: Path | None = None) -> ShowResult:
    """Every run and finding in the bank; with ``workload``, only those it would use, and its priors."""
    bank, problem = _open(url)
    if bank is None:
        return ShowResult(status="error", message=problem)
    with bank:
        runs = bank.runs()
        view = None
        if workload is not None:
            try:
                view = _workload(bank, Path(workload).resolve())
            except ContractError as error:
                return ShowResult(status="error", message=str(error), url=bank.url)
            runs = [r for r in runs if view.similarity.get(r.id, 0.0) >= MIN_SIMILARITY]
    findings = sum(len(r.effects) for r in runs)
    scope = f" used for {view.signature}" if view is not None else ""
    return ShowResult(status="ok", message=f"{len(runs)} run(s), {findings} finding(s){scope}", url=bank.url,
                      runs=runs, workload=view)


def parse_date(text: str) -> datetime:
    """``YYYY-MM-DD`` or a full ISO timestamp; without a zone, UTC. ValueError when neither."""
    when = datetime.fromisoformat(text)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def forget(url: str | None = None, *, finding: str | None = None, run_id: str | None = None,
           before: str | None = None) -> ForgetResult:
    """Delete one finding (its id from ``show``) or every finding of a setting (``threads=2``,
    ``patch:sdpa_attention``), one run (``run_id``), or every run recorded before ``before``."""
    if sum(x is not None for x in (finding, run_id, before)) != 1:
        return ForgetResult(status="error", message="give exactly one of FINDING, --run ID or --before DATE")
    when = None
    if before is not None:
        try:
            when = parse_date(before)
        except ValueError:
            return ForgetResult(status="error", message=f"--before {before!r}: not a date (YYYY-MM-DD or ISO 8601)")
    bank, problem = _open(url)
    if bank is None:
        return ForgetResult(status="error", message=problem)
    with bank:
        gone = bank.forget(finding=finding, run_id=run_id, before=when)
    if finding is not None:
        what = f"finding {finding}"
    elif run_id is not None:
        what = f"run {run_id}"
    else:
        assert when is not None  # exactly one of the three was given
        what = f"runs recorded before {when.isoformat()}"
    if not (gone.runs or gone.effects or gone.verdicts or gone.best):
        return ForgetResult(status="not_found", message=f"nothing to forget: no {what} in the bank", forgotten=gone)
    return ForgetResult(status="ok", message=f"forgot {what}: {gone.runs} run(s), {gone.effects} effect(s), "
                                             f"{gone.verdicts} patch verdict(s), {gone.best} best configuration(s)",
                        forgotten=gone)
