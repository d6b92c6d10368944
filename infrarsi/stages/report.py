"""report: what the run measured, in one place: speedup with confidence, MFU before and after,
every failed trial and its cost, memory prices, priors against observations, and the exact source
each verified candidate touches.

Reads the contract, ``doctor.json``, ``run.json`` and the study; writes ``.infrarsi/report.md``,
``.infrarsi/report.html`` and the plots under ``.infrarsi/report/``. It measures nothing itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy.exc

from infrarsi.contract import Contract, ContractError
from infrarsi.experiment.store import StoredTrial, TrialStore, hide_password, password_hidden
from infrarsi.project import PreparedRepo
from infrarsi.records import DoctorError, RunResult, load_run
from infrarsi.records.files import plots_dir, report_path, state_dir
from infrarsi.report import document, html, markdown
from infrarsi.report.model import Report, build_report
from infrarsi.report.plots import draw_all

FORMATS = ("md", "html")


@dataclass(kw_only=True, slots=True)
class ReportResult:
    status: str
    """ok | refused (the contract is missing or a locked file changed) | error (nothing to report)."""
    message: str
    paths: list[str] = field(default_factory=list)
    """Files written: the documents first, then the plots."""
    report: Report | None = None


def _stored_trials(run: RunResult, contract: Contract, storage: str | None) -> list[StoredTrial] | None:
    """The run's study, read only; None when it is gone (the report then says what it cannot show).

    run.json keeps the storage URL without its password: ``storage`` (the full URL) reopens it."""
    url = storage if storage and hide_password(storage) == run.storage_url else run.storage_url
    if password_hidden(url):
        return None
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return None  # opening a missing SQLite file would create an empty one
    try:
        store = TrialStore.existing(contract, storage_url=url, name=run.study_name)
    except (KeyError, OSError, sqlalchemy.exc.SQLAlchemyError):
        return None
    return store.trials()


def report(repo: Path, *, formats: tuple[str, ...] = FORMATS, storage: str | None = None) -> ReportResult:
    """Gather the report and write it in ``formats`` (any of md, html; none: only return it)."""
    repo = Path(repo)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        return ReportResult(status="error", message=f"unknown format {unknown[0]!r}; choose from {', '.join(FORMATS)}")
    try:
        prepared = PreparedRepo.open(repo)
    except ContractError as err:
        return ReportResult(status="refused", message=str(err))
    except DoctorError as err:
        return ReportResult(status="error", message=str(err))
    contract, doctor = prepared.contract, prepared.doctor
    if doctor is None:
        return ReportResult(status="error", message=f"no baseline profile in {state_dir(repo)}; "
                                                    f"run `infrarsi doctor {repo}` and `infrarsi run {repo}` first")
    run = load_run(repo)
    if run is None:
        return ReportResult(status="error", message=f"no run yet in {state_dir(repo)}: nothing to report; "
                                                    f"run `infrarsi run {repo}` first")
    gathered = build_report(str(repo), contract, doctor, run, _stored_trials(run, contract, storage))
    paths: list[Path] = []
    if formats:
        plots = draw_all(gathered, plots_dir(repo))
        blocks = document.blocks(gathered, plots)
        if "md" in formats:
            paths.append(_write(report_path(repo, "md"), markdown.render(blocks, state_dir(repo))))
        if "html" in formats:
            paths.append(_write(report_path(repo, "html"), html.render(blocks, f"InfraRSI report: {repo.name}")))
        paths += plots.values()
    message = run.message or f"run {run.run_id}: {run.status}"
    return ReportResult(status="ok", message=message, paths=[str(p) for p in paths], report=gathered)


def _write(path: Path, text: str) -> Path:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path
