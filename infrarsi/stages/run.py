"""run: co-optimize launch knobs and patches with real trials, then re-verify the best against the baseline.

Every trial lands in the Optuna study as soon as it ends, so Ctrl-C, a crash or a killed worker
loses nothing measured; running again continues the same study. The summary of the latest run is
written to ``.infrarsi/run.json`` for report and apply.
"""

from __future__ import annotations

import datetime as dt
import secrets
import time
from pathlib import Path
from typing import Any

import sqlalchemy.exc

from infrarsi import patches as patch_library
from infrarsi.background import Background
from infrarsi.bank.experience import Experience
from infrarsi.contract import Contract, require_intact
from infrarsi.events import Event, EventSink, ignore
from infrarsi.llm import LLMConfig, load_llm_config
from infrarsi.patches.diff_patch import LLM_PREFIX
from infrarsi.patches.llm_proposals import cached_proposals
from infrarsi.patches.numerics import numerics_by_design
from infrarsi.records import (
    BankPriorRow,
    MemoryPriceRow,
    PatchCheck,
    PriorCheckRow,
    RunResult,
    RunStatus,
    TrialRow,
    Verdict,
    load_doctor,
    save_run,
)
from infrarsi.records.files import state_dir
from infrarsi.runner.interference import idle_load, job_cores, measured_background
from infrarsi.runner.sandbox import bwrap_problem, mode_words
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.search.space import SearchSpace
from infrarsi.search.strategy import SAMPLERS, make_strategy
from infrarsi.stages import quiet
from infrarsi.study import TrialStore, default_storage_url, hide_password
from infrarsi.study_round import MEASURING, WAIT_POLL_S, SharedRound
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.verification import Lengths, Rounds, best_promoted, interleave, job_seconds

ABORT_FACTOR = 1.5
"""A trial whose measured steps are this much slower than the incumbent's is stopped early."""


class _Session:
    """One invocation of run: the store, the budget, and how a trial is executed and recorded."""

    def __init__(self, repo: Path, contract: Contract, store: TrialStore, deadline: float | None,
                 max_trials: int | None, on_event: EventSink, sandbox: bool = True):
        self.repo = repo
        self.sandbox = sandbox
        self.contract = contract
        self.store = store
        self.deadline = deadline
        self.max_trials = max_trials
        self.on_event = on_event
        self.started = 0
        self.timeout_s: float | None = None
        self.round = SharedRound(store)
        """This session's round of the (possibly shared) study: infrarsi/study_round.py."""
        self.verified_here = False
        self.reference_checksums: dict[int, list[float]] = {}
        """The baseline's parameters after each length doctor ran, from doctor: every trial of
        such a length that compares its losses compares them too."""
        self.background = Background.unmeasured(len(job_cores()))
        """The machine's normal background, doctor's measure until the run measures it again
        (``_renormalize``): beyond it a trial is disturbed."""
        self.doctor_background = self.background
        self.quiet = quiet.QuietWaiter(self.background.limit_cores, None, "run", on_event)
        """Waiting for quiet: no budget until ``run`` gives it ``--wait-for-quiet``'s."""
        self.last_number = -1
        self.baseline: Candidate | None = None
        self.baseline_step_s: float | None = None
        self.baseline_steps: list[float] = []
        self.lengths = Lengths.of(contract.workload)
        """Verification's two lengths: doctor's (``DoctorReport.verification_steps``)."""
        """The baseline trial's time of each step, warm-up included: the abort bound's reference."""
        self.slowdown = 1.0
        """The baseline's step time under the machine's current normal over its first: a bound on
        a slow trial (``abort_step_time``) is stretched by it, since every trial now runs slower."""
        self.renormalized: list[dict] = []
        """Each time the machine's normal was measured again (``_renormalize``)."""

    def budget_left(self) -> bool:
        return not self.budget_spent()

    def budget_spent(self) -> str:
        """What ended the search, in words; empty while trials may still start."""
        if self.max_trials is not None and self.started >= self.max_trials:
            return f"the budget of {self.max_trials} trials"
        if self.round.claims():
            return "another worker ended this round's search"
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return "the time budget"
        return ""

    def execute(self, candidate: Candidate, kind: str, *, abort_step_time: float | None = None,
                reason: str = "", exclusive: tuple[str, ...] = (), steps: int | None = None) -> TrialResult | None:
        """Run one trial and record it. With ``exclusive`` kinds, a candidate another worker began
        first (as one of those kinds) is given up before it runs: None is returned. A disturbed
        trial is recorded and rerun (after waiting for quiet when asked; stages/quiet.py)."""
        result = self._execute_once(candidate, kind, abort_step_time=abort_step_time, reason=reason,
                                    exclusive=exclusive, steps=steps)
        attempt = 0
        while quiet.should_rerun(result, attempt):
            attempt += 1
            disturbed = self.last_number
            self.quiet.wait(f"trial {disturbed} was disturbed")
            if attempt == quiet.MAX_RERUNS:
                self._renormalize(disturbed)
            result = self._execute_once(result.candidate, kind, abort_step_time=abort_step_time,
                                        reason=quiet.rerun_reason(disturbed, reason), steps=steps)
        if result is not None and kind in ("baseline", "validation", "search"):
            self.started += 1
        return result

    def once(self, candidate: Candidate, kind: str, *, reason: str) -> TrialResult:
        """A trial the round needs once whoever runs it (the baseline, a patch's validation)."""
        return self.round.once(candidate, kind, lambda: self.execute(candidate, kind, reason=reason, exclusive=(kind,)))

    def _renormalize(self, disturbed: int) -> None:
        """A disturbance that outlasted a rerun (another job that stays) is the machine's new normal:
        measured again as doctor measures it, an idle sample and a baseline trial, and the rest of
        the run is judged against it; unless the baseline now runs more than ``quiet.MAX_SLOWDOWN``
        slower than at first, which ends the run (``MachineChanged``). That baseline trial is judged
        against the normal it replaces: a slowed one is recorded disturbed and teaches the models
        nothing. Nothing changes when the machine is quiet again."""
        cores = job_cores()
        idle = idle_load(cores=cores)
        if idle <= self.background.limit_cores or self.baseline is None:
            return
        self.on_event(Event("run", "log", f"trial {disturbed} stayed disturbed: other processes use {idle:.2f} of the "
                                          f"job's {len(cores)} cores; measuring the machine's new normal with a baseline trial"))
        base = self._execute_once(self.baseline, quiet.NORMAL, abort_step_time=None,
                                  reason=f"the machine's normal measured again (trial {disturbed} stayed disturbed)")
        if base is None or base.status not in (TrialStatus.OK, TrialStatus.DISTURBED) or not base.step_time:
            return
        self.background = measured_background([base.interference], idle)
        if self.baseline_step_s:
            self.slowdown = max(1.0, base.step_time / self.baseline_step_s)
        self.quiet.limit_cores = self.background.limit_cores
        stopped = self.slowdown > quiet.MAX_SLOWDOWN
        self.renormalized.append({"after_trial": disturbed, "trial": self.last_number, "stopped": stopped,
                                  "background": self.background.to_dict(), "slowdown": round(self.slowdown, 3)})
        if stopped:
            raise MachineChanged(
                f"the machine stayed busy from trial {disturbed} on: other processes use "
                f"{self.background.normal_cores:.2f} of the job's {len(cores)} cores and the baseline runs "
                f"{self.slowdown:.1f}x slower than at the start (trial {self.last_number}; at most "
                f"{quiet.MAX_SLOWDOWN}x is measured on)")
        self.on_event(Event("run", "log", f"the machine's normal is now {self.background.normal_cores:.2f} cores of "
                                          f"other processes (a trial above {self.background.limit_cores:.2f} is disturbed)"))

    def _execute_once(self, candidate: Candidate, kind: str, *, abort_step_time: float | None,
                      reason: str, exclusive: tuple[str, ...] = (), steps: int | None = None) -> TrialResult | None:
        """One trial, recorded."""
        trial = self.store.begin(candidate, kind)
        if exclusive:
            earlier = self.store.earlier_duplicate(trial, exclusive)
            if earlier is not None:
                self.store.give_up(trial, earlier.number)
                return None
        candidate = self.store.candidate_of(trial)
        trial.set_user_attr("reason", reason)
        spec = TrialSpec(
            repo=self.repo,
            contract=self.contract,
            candidate=candidate,
            steps=steps,
            abort_step_time=abort_step_time * self.slowdown if abort_step_time else None,
            baseline_steps=self.baseline_steps,
            one_off_warmup=_declared_startup(self.contract, candidate) is None,
            timeout_s=self.timeout_s * self.slowdown if self.timeout_s else None,
            numerics_by_design=numerics_by_design(candidate),
            sandbox=self.sandbox,
            reference_checksums=self.reference_checksums,
            background=self.background,
        )
        self.last_number = trial.number
        began = time.monotonic()
        try:
            with self.store.heartbeat(trial):
                result = run_trial(spec)
        except KeyboardInterrupt:
            self.store.interrupted(trial, time.monotonic() - began)
            raise
        self.store.finish(trial, result)
        step = f"{result.step_time * 1000:.1f} ms/step" if result.step_time else result.detail[:80]
        self.on_event(Event(stage="run", kind="report", message=f"trial {trial.number} ({kind}): {result.status.value}, {step}",
                            done=self.started, total=self.max_trials,
                            data={"number": trial.number, "kind": kind, "status": result.status.value,
                                  "candidate": candidate.to_dict(), "step_s": result.step_time, "wall_s": result.wall_s}))
        return result


def _declared_startup(contract: Contract, candidate: Candidate) -> float | None:
    """Compilation's start-up is a declared one-off cost of any size (None); other candidates
    declare none, so their start-up must stay within the baseline's noise."""
    device = contract.memory.device

    def compiled(patch: str) -> bool:
        belief = patch_library.REGISTRY[patch].prior.get(device) if patch in patch_library.REGISTRY else None
        return belief is not None and belief.effect.startup_s > 0

    compiles = any(contract.knob(k).role == "compile" and bool(v) for k, v in candidate.knobs.items()) or any(
        compiled(p) for p in candidate.patches)
    return None if compiles else 0.0


def _row(number: int, kind: str, result: TrialResult, planned_steps: int, reason: str = "") -> TrialRow:
    return TrialRow(
        number=number, kind=kind, status=result.status.value, candidate=result.candidate.to_dict(),
        step_s=result.step_time, job_s=job_seconds(result, planned_steps), peak_bytes=result.peak_bytes,
        wall_s=result.wall_s, detail=result.detail[-300:], reason=reason, rank_peak_bytes=result.rank_peak_bytes,
        load_cores=result.interference.get("mean_load_cores"),
    )


def _validate_patches(session: _Session, baseline: Candidate, names: list[str]) -> list[PatchCheck]:
    """Each patch once, alone on the baseline: it must apply in scope, import and keep the loss."""
    done = {tuple(s.result.candidate.patches): s.result for s in session.store.trials(("validation",))}
    checks = []
    for name in names:
        result = done.get((name,))
        if result is None:
            if not session.budget_left():
                break
            cand = Candidate(knobs=dict(baseline.knobs), patches=(name,))
            result = session.once(cand, "validation", reason=f"validate patch {name}")
        status = "validated" if result.ok else result.status.value
        checks.append(PatchCheck(name=name, status=status, reason=result.detail[-300:], cost_s=result.wall_s))
    return checks


def _applicable_patches(repo: Path, contract: Contract, device: str, *, goal: str = "faster",
                        doctor: dict[str, Any] | None = None,
                        llm: LLMConfig | None = None) -> tuple[list[str], list[PatchCheck]]:
    names, refused = patch_library.applicable(repo, contract, device)
    skipped = [PatchCheck(name=name, status="skipped", reason=why, cost_s=0.0) for name, why in refused.items()]
    llm = llm if llm is not None else load_llm_config(repo)
    if llm.configured:  # proposals go through the same one-time validation as library patches
        proposals = cached_proposals(repo, contract, doctor, goal, llm)
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
) -> RunResult:
    """Search, verify, promote. Never raises for a failing trial; Ctrl-C returns status interrupted.

    ``verify=False`` ends after the search (status ``searched``): the benchmark's live mode judges
    every method's pick against its measured table instead of re-verifying each. ``wait_for_quiet``:
    seconds the run may spend waiting for other processes to leave the job's cores (before it
    starts and before each rerun of a disturbed trial); None: it never waits."""
    repo = Path(repo).resolve()
    if sampler not in SAMPLERS:
        return RunResult(status=RunStatus.ERROR, message=f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}")
    if trials is None and minutes is None:
        trials = 20
    contract = require_intact(repo)
    problem = bwrap_problem() if sandbox else None
    if problem:
        return RunResult(status=RunStatus.ERROR, message=problem, sandbox=mode_words(sandbox))
    llm = load_llm_config(repo)  # read once: the proposals and the priors get this one
    for warning in llm.warnings:
        on_event(Event(stage="run", kind="log", message=f"warning: {warning}"))
    doctor = load_doctor(repo)
    if doctor is None:
        return RunResult(status=RunStatus.ERROR, message=f"no baseline profile in {state_dir(repo)}; run `infrarsi doctor {repo}` first")
    device = contract.memory.device
    patch_names, skipped = _applicable_patches(repo, contract, device, goal=goal, doctor=doctor.to_dict(), llm=llm)
    storage_url = storage or default_storage_url(repo)
    context = make_strategy(sampler, repo=repo, contract=contract, doctor=doctor, seed=seed, llm=llm)
    experience = Experience.open(bank_url, contract, doctor.model_facts, doctor.hardware) if use_bank else None
    if experience is not None:
        advice = experience.advice(contract)
        context.use_bank(advice.priors, advice.seeds)
    shown_url = hide_password(storage_url)
    try:
        store = TrialStore.open(contract, patch_names, storage_url=storage_url)
    except sqlalchemy.exc.SQLAlchemyError as err:
        why = str(err.orig if getattr(err, "orig", None) else err).strip().splitlines()[0]
        return RunResult(status=RunStatus.ERROR, message=f"the study storage {shown_url} cannot be opened: "
                                                 f"{_without(why, storage_url, shown_url)}", sandbox=mode_words(sandbox))
    store.fail_stale()
    result = RunResult(status=RunStatus.OK, message="", run_id=new_run_id(), sampler=sampler, storage_url=shown_url,
                       study_name=store.study.study_name, started=dt.datetime.now().isoformat(timespec="seconds"),
                       noise_floor=doctor.noise.min_speedup, priors_source=context.priors_source,
                       sandbox=mode_words(sandbox))
    deadline = time.monotonic() + minutes * 60 if minutes is not None else None
    session = _Session(repo, contract, store, deadline, trials, on_event, sandbox)
    session.reference_checksums = doctor.checksums
    session.lengths = Lengths.recorded(contract.workload, doctor.verification_steps)
    session.background = session.doctor_background = doctor.background or session.background
    session.quiet = quiet.QuietWaiter(session.background.limit_cores, wait_for_quiet, "run", on_event)
    on_event(Event(stage="run", kind="begin", message=f"{sampler} search, {trials or '-'} trials / {minutes or '-'} min",
                   done=0, total=trials))
    try:
        session.quiet.wait("before the first trial")
        _search(session, context, patch_names, result)
        if verify:
            _conclude(session, context, result)
        else:
            result.status, result.message = RunStatus.SEARCHED, f"search ended ({result.search_ended}); not re-verified"
    except _Stop as stop:
        result.status = RunStatus.ERROR
        result.message = str(stop)
    except MachineChanged as changed:
        result.status = RunStatus.NO_PROMOTION
        result.search_ended = result.search_ended or str(changed)
        result.message = (f"stopped without promoting: {changed}. Every trial is kept in the study: run again when "
                          f"the machine is quiet (--wait-for-quiet SECONDS waits for it)")
    except KeyboardInterrupt:
        result.status = RunStatus.INTERRUPTED
        result.message = "interrupted: every finished trial is kept in the study; run again to continue"
    _summarize(session, context, result, skipped)
    save_run(result, repo)
    if (experience is not None and context.space is not None  # the search began: there are findings
            and result.status in (RunStatus.OK, RunStatus.NO_PROMOTION) and session.verified_here):  # one worker per round records them
        experience.record(result, store.history(), contract=contract, space=context.space, priors=context.priors,
                          noise_cv=context.noise_cv)
    on_event(Event(stage="run", kind="end", message=result.message))
    return result


def _search(session: _Session, context, patch_names: list[str], result: RunResult) -> None:
    contract = session.contract
    baseline = context.baseline()
    session.baseline = baseline
    measured = [s.result for s in session.store.trials(("baseline",)) if s.result.ok]
    base = measured[0] if measured else session.once(baseline, "baseline", reason="baseline")
    if not base.ok:
        raise _Stop(f"the baseline itself ended {base.status.value}: {base.detail[-300:]}")
    result.baseline = base
    session.baseline_step_s = base.step_time
    session.baseline_steps = [*base.warmup_times, *base.step_times]
    # Generous: a compiled candidate pays tens of seconds of start-up before its first step.
    session.timeout_s = max(180.0, 6 * base.wall_s)
    result.patch_checks = _validate_patches(session, baseline, patch_names)
    validated = [c.name for c in result.patch_checks if c.status == "validated"]
    space = SearchSpace.from_contract(contract, validated)
    context.prepare(space, patch_names)
    given_up = 0
    while True:
        result.search_ended = session.budget_spent()
        if result.search_ended:
            break
        history = session.store.history()
        incumbent = min((t.step_time for t in history if t.ok and t.step_time), default=None)
        abort = incumbent * ABORT_FACTOR if incumbent else None
        # What other workers are running now is taken: shown to the sampler as tried (a status
        # that teaches the models nothing), so two workers asking at once get different answers.
        running = session.store.running_candidates(MEASURING)
        proposal = context.propose(history + [TrialResult(status=TrialStatus.TIMEOUT, candidate=c) for c in running])
        if proposal is None:
            if running:  # the rest of the space is running elsewhere: it may still fail and be retried
                time.sleep(WAIT_POLL_S)
                session.store.fail_stale()
                continue
            result.search_ended = context.stop_reason
            break
        # Two workers can still ask in the same instant: the later-numbered trial gives way (a
        # sampler that repeats measured candidates means it: its proposal never gives way).
        exclusive = () if context.sampler.repeats else MEASURING
        if session.execute(proposal.candidate, "search", abort_step_time=abort, reason=proposal.reason,
                           exclusive=exclusive) is None:
            given_up += 1
            if given_up > 20:
                raise _Stop("gave way to other workers 20 times in a row: the study's running trials look inconsistent")
        else:
            given_up = 0


class _Stop(Exception):
    """The search cannot go on (the baseline fails); reported as the run's status, not raised to the user."""


class MachineChanged(Exception):
    """Other work took the machine for good, far beyond the normal the run began with: the run ends
    without promoting (what it measured stands in the study); reported, not raised to the user."""


def _conclude(session: _Session, context, result: RunResult) -> None:
    """Verification, once for the round however many workers share the study
    (``SharedRound.conclude``): here, or read from the worker that did it."""

    def verify_here() -> dict[str, Any]:
        _verify(session, context, result)
        return {"status": result.status, "message": result.message,
                "verdicts": [v.to_dict() for v in result.verdicts],
                "promoted": result.promoted.to_dict() if result.promoted else None}

    elsewhere = session.round.conclude(
        verify_here, wait_limit_s=(session.timeout_s or 600.0) + session.store.grace_s() + 60.0)
    if elsewhere is None:
        session.verified_here = True
        return
    number, data = elsewhere
    result.status = RunStatus(data["status"])
    result.message = f"verified by another worker (study trial {number}): {data['message']}"
    result.verdicts = [Verdict.from_dict(v) for v in data["verdicts"]]
    result.promoted = Verdict.from_dict(data["promoted"]) if data["promoted"] else None


def _verify(session: _Session, context, result: RunResult) -> None:
    contract = session.contract
    policy = contract.verify_policy
    top = context.to_verify(session.store.history(), policy.candidates)
    if not top:
        result.status = RunStatus.NO_PROMOTION
        result.message = "no candidate ranked ahead of the baseline or measured faster than it to verify"
        return

    def run_one(cand: Candidate, _round: int, steps: int) -> TrialResult:
        return session.execute(cand, "verification", reason=f"re-verification, {steps} steps", steps=steps)

    result.verdicts, _ = interleave(
        top, context.baseline(), run_one,
        rounds=Rounds.of(policy), lengths=session.lengths, floor=result.promotion_floor,
        compare_steps=contract.loss.compare_steps,
        declared_startup=lambda cand: _declared_startup(contract, cand),
        untrusted=lambda cand: any(p.startswith(LLM_PREFIX) for p in cand.patches))
    result.promoted = best_promoted(result.verdicts)
    if result.promoted:
        lo = result.promoted.job_speedup[1]
        result.message = f"promoted: {result.promoted.job_speedup[0]:.2f}x faster (95% CI low {lo:.2f}x)"
    else:
        result.status = RunStatus.NO_PROMOTION
        result.message = "no candidate cleared the promotion floor in re-verification"


def _summarize(session: _Session, context, result: RunResult, skipped: list[PatchCheck]) -> None:
    planned = session.contract.workload.planned_steps
    stored = session.store.trials()
    reasons = {t.number: t.user_attrs.get("reason", "") for t in session.store.study.get_trials(deepcopy=False)}
    result.trials = [_row(s.number, s.kind, s.result, planned, reasons.get(s.number, "")) for s in stored]
    result.patch_checks = [*result.patch_checks, *skipped]
    result.spent_s = sum(s.result.wall_s for s in stored)
    result.interrupted_s = session.store.interrupted_seconds()
    history = [s.result for s in stored]
    result.prior_checks = [PriorCheckRow(**c) for c in context.prior_checks(history)]
    result.bank_priors = [BankPriorRow(**b) for b in context.bank_outcomes(history)]
    result.memory_prices = [MemoryPriceRow(**p) for p in context.memory_prices(history)]
    result.disturbance = quiet.summary(result.trials, result.spent_s, session.quiet.waited_s,
                                       session.doctor_background.to_dict(), session.renormalized)
