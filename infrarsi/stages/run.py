"""run: co-optimize launch knobs and patches with real trials, then re-verify the best against the baseline.

Every trial lands in the Optuna study as soon as it ends, so Ctrl-C, a crash or a killed worker
loses nothing measured; running again continues the same study. The summary of the latest run is
written to ``.infrarsi/run.json`` for report and apply. The trials, the search loop, re-verification
and the summary are the experiment engine's (infrarsi/experiment/); this stage opens the study and
puts them together.
"""

from __future__ import annotations

import datetime as dt
import secrets
import time
from dataclasses import replace
from pathlib import Path

import sqlalchemy.exc

from infrarsi import patches as patch_library
from infrarsi.bank.experience import Experience
from infrarsi.events import Event, EventSink, ignore
from infrarsi.experiment.concluded import Conclusion
from infrarsi.experiment.conclusion import conclude
from infrarsi.experiment.run_record import RunStart, run_record
from infrarsi.experiment.search_loop import Search, SearchOutcome, SearchStopped
from infrarsi.experiment.session import MachineChanged, TrialSession
from infrarsi.experiment.store import TrialStore, default_storage_url, hide_password
from infrarsi.experiment.summary import summarize
from infrarsi.llm import LLMConfig
from infrarsi.patches.llm_proposals import cached_proposals
from infrarsi.project import Project
from infrarsi.records import DoctorError, PatchCheck, RunResult, RunStatus, save_run
from infrarsi.runner.sandbox import bwrap_problem, mode_words
from infrarsi.search.strategy import SAMPLERS, make_strategy


def _applicable_patches(project: Project, *, goal: str = "faster") -> tuple[list[str], list[PatchCheck]]:
    contract = project.contract
    names, refused = patch_library.applicable(project.sources, contract, contract.memory.device)
    skipped = [PatchCheck(name=name, status="skipped", reason=why, cost_s=0.0) for name, why in refused.items()]
    if project.llm.configured:  # proposals go through the same one-time validation as library patches
        proposals = cached_proposals(project, goal)
        names += proposals.names
        skipped += [PatchCheck(name=r.name, status=r.status, reason=f"{r.title}: {r.reason}", cost_s=0.0)
                    for r in proposals.rejected]
        if proposals.status != "ok":
            skipped.append(PatchCheck(name="llm", status="skipped", reason=proposals.message, cost_s=0.0))
    return names, skipped


def _without(text: str, *secrets_in: str) -> str:
    """``text`` with any password of the given URLs replaced (drivers may echo the URL)."""
    from sqlalchemy.engine import make_url

    for url in secrets_in:
        try:
            password = make_url(url).password
        except Exception:  # not a database URL: nothing to hide
            continue
        if password:
            text = text.replace(str(password), "***")
    return text


def new_run_id() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def run(
    repo: Path,
    *,
    trials: int | None = None,
    minutes: float | None = None,
    sampler: str = "infrarsi",
    storage: str | None = None,
    seed: int = 0,
    bank_url: str | None = None,
    use_bank: bool = True,
    on_event: EventSink = ignore,
    goal: str = "faster",
    verify: bool = True,
    sandbox: bool = True,
    wait_for_quiet: float | None = None,
    llm: LLMConfig | None = None,
) -> RunResult:
    """Search, verify, promote. Never raises for a failing trial; Ctrl-C returns status interrupted.

    ``verify=False`` ends after the search (status ``searched``): the benchmark's live mode judges
    every method's pick against its measured table instead of re-verifying each. ``wait_for_quiet``:
    seconds the run may spend waiting for other processes to leave the job's cores (before it
    starts and before each rerun of a disturbed trial); None: it never waits. ``llm``: the model
    configuration the caller already read and warned about (``optimize``); None: read it here."""
    repo = Path(repo).resolve()
    if sampler not in SAMPLERS:
        return RunResult(status=RunStatus.ERROR, message=f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}")
    if trials is None and minutes is None:
        trials = 20
    try:
        project = Project.open(repo, llm)
    except DoctorError as err:
        return RunResult(status=RunStatus.ERROR, message=str(err))
    problem = bwrap_problem() if sandbox else None
    if problem:
        return RunResult(status=RunStatus.ERROR, message=problem, sandbox=mode_words(sandbox))
    if llm is None:  # read here, so said here (a caller that read it has said them)
        for warning in project.llm.warnings:
            on_event(Event(stage="run", kind="log", message=f"warning: {warning}"))
    contract, doctor = project.contract, project.doctor
    patch_names, skipped = _applicable_patches(project, goal=goal)
    storage_url = storage or default_storage_url(repo)
    context = make_strategy(sampler, project, seed=seed)
    experience = Experience.open(bank_url, contract, doctor.model_facts, doctor.hardware) if use_bank else None
    if experience is not None:
        advice = experience.advice(contract, context.priors)
        context.use_bank(advice.priors, advice.seeds)
    shown_url = hide_password(storage_url)
    try:
        store = TrialStore.open(contract, patch_names, storage_url=storage_url)
    except sqlalchemy.exc.SQLAlchemyError as err:
        why = str(getattr(err, "orig", None) or err).strip().splitlines()[0]
        return RunResult(status=RunStatus.ERROR, message=f"the study storage {shown_url} cannot be opened: "
                                                 f"{_without(why, storage_url, shown_url)}", sandbox=mode_words(sandbox))
    store.fail_stale()
    start = RunStart(run_id=new_run_id(), started=dt.datetime.now().isoformat(timespec="seconds"), sampler=sampler,
                     storage_url=shown_url, study_name=store.study.study_name, sandbox=mode_words(sandbox),
                     noise_floor=doctor.noise.min_speedup, priors_source=context.priors_source, skipped=tuple(skipped))
    deadline = time.monotonic() + minutes * 60 if minutes is not None else None
    session = TrialSession(repo, contract, store, deadline=deadline, max_trials=trials, on_event=on_event,
                           sandbox=sandbox, doctor=doctor, baseline=context.baseline(), wait_for_quiet=wait_for_quiet)
    on_event(Event(stage="run", kind="begin", message=f"{sampler} search, {trials or '-'} trials / {minutes or '-'} min",
                   done=0, total=trials))
    search = Search(session, context, patch_names, noise_floor=start.noise_floor)
    searched, concluded = _search_and_conclude(session, search, verify)
    result = run_record(start, searched, concluded, summarize(session, search.strategy))
    save_run(result, repo)
    prepared = search.prepared
    if (experience is not None and prepared is not None  # the search began: there are findings
            and result.status in (RunStatus.OK, RunStatus.NO_PROMOTION)
            and concluded.elsewhere is None):  # one worker per round records them: the one that verified
        experience.record(result, store.history(), contract=contract, space=prepared.space, priors=prepared.priors,
                          own=prepared.own_priors, noise_cv=prepared.noise_cv)
    on_event(Event(stage="run", kind="end", message=result.message))
    return result


def _search_and_conclude(session: TrialSession, search: Search, verify: bool) -> tuple[SearchOutcome, Conclusion]:
    """The search and how the run ends: re-verified (``verify``), or the search alone. A search cut
    short (a failed baseline, a machine that changed, Ctrl-C) ends with what it found so far."""
    try:
        session.wait_for_quiet("before the first trial")
        searched = search.run()
        if not verify:
            return searched, Conclusion(RunStatus.SEARCHED, f"search ended ({searched.ended}); not re-verified")
        return searched, conclude(session, search.strategy)
    except SearchStopped as stop:
        return search.outcome, Conclusion(RunStatus.ERROR, str(stop))
    except MachineChanged as changed:  # during the search it is why the search ended; after, the search's own reason stands
        return (replace(search.outcome, ended=search.outcome.ended or str(changed)),
                Conclusion(RunStatus.NO_PROMOTION,
                           f"stopped without promoting: {changed}. Every trial is kept in the study: run again when "
                           f"the machine is quiet (--wait-for-quiet SECONDS waits for it)"))
    except KeyboardInterrupt:
        return search.outcome, Conclusion(RunStatus.INTERRUPTED,
                                          "interrupted: every finished trial is kept in the study; run again to continue")
