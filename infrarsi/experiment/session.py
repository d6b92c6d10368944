"""A trial session: the study, the budget, and how each trial is recorded in the study (run and
rerun while disturbed by ``experiment/trial_runner.py``).

Built complete from doctor's report; what it learns while it runs (the baseline's steps, the
machine's normal measured again) it keeps itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from infrarsi.contract import Contract
from infrarsi.events import Event, EventSink, ignore
from infrarsi.experiment import quiet
from infrarsi.experiment.shared_round import SharedRound
from infrarsi.experiment.startup import declared_startup
from infrarsi.experiment.store import RunningTrial, TrialStore
from infrarsi.experiment.trial_runner import Attempt, TrialArgs, TrialRunner, normal_background
from infrarsi.patches.numerics import numerics_by_design
from infrarsi.records import DoctorReport, Renormalization
from infrarsi.runner.interference import idle_load, job_cores, measured_background
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.whole_process import Lengths, Pair

BUDGETED = ("baseline", "validation", "search")
"""The kinds of trial the trial budget counts (a rerun is its trial again, not another)."""


class MachineChanged(Exception):
    """Other work took the machine for good, far beyond the normal the run began with: the run ends
    without promoting (what it measured stands in the study); reported, not raised to the user."""


class TrialSession:
    """One invocation of run: the store, the budget, and how a trial is executed and recorded."""

    def __init__(self, repo: Path, contract: Contract, store: TrialStore, *, deadline: float | None = None,
                 max_trials: int | None = None, on_event: EventSink = ignore, sandbox: bool = True,
                 doctor: DoctorReport | None = None, baseline: Candidate | None = None,
                 wait_for_quiet: float | None = None) -> None:
        """``doctor``: the baseline's profile the trials are held to (None: the contract's lengths,
        no checksums, an unmeasured background); ``wait_for_quiet``: seconds the session may wait
        for a busy machine in all (None: it never waits)."""
        background = normal_background(doctor)
        self.runner = TrialRunner.for_stage(repo, contract, "run", background=background, held_to=doctor,
                                            wait_for_quiet=wait_for_quiet, sandbox=sandbox, on_event=on_event)
        """How each trial runs and is rerun while disturbed, judged against the machine's normal:
        doctor's, until the run measures it again (``_renormalize``)."""
        self.store = store
        self.deadline = deadline
        self.max_trials = max_trials
        self.on_event = on_event
        self.started = 0
        self.timeout_s: float | None = None
        self.round = SharedRound(store)
        """This session's round of the (possibly shared) study: infrarsi/experiment/shared_round.py."""
        self.doctor_background = background
        """The normal the run began with (the summary's), however often it is measured again."""
        self.baseline = baseline
        """The candidate the machine's normal is measured again with (``_renormalize``)."""
        self.baseline_step_s: float | None = None
        self.baseline_steps: list[float] = []
        """The baseline trial's time of each step, warm-up included: the abort bound's reference."""
        self.lengths = (Lengths.recorded(contract.workload, doctor.verification_steps) if doctor
                        else Lengths.of(contract.workload))
        """Verification's two lengths: doctor's (``DoctorReport.verification_steps``)."""
        self.reference: tuple[Pair, ...] = Pair.recorded(doctor.reference_pair) if doctor else ()
        """Doctor's baseline pair at these lengths: verification's first baseline round."""
        self.spread_prior = doctor.spread_prior if doctor else None
        """The spread doctor expects of one verification round's job time: how many rounds to
        plan (``Rounds.sized``), and what each job interval is moderated toward."""
        self.startup_limit_s = doctor.startup_limit_s if doctor else None
        """Doctor's longest plausible start-up: verification's runs are held to it (``_args``)."""
        self.renormalized: list[Renormalization] = []
        """Each time the machine's normal was measured again (``_renormalize``)."""

    @property
    def contract(self) -> Contract:
        return self.runner.contract

    def use_baseline(self, base: TrialResult) -> None:
        """The baseline's measurement: the reference of the abort bound and of every trial's timeout."""
        self.baseline_step_s = base.step_time
        self.baseline_steps = [*base.warmup_times, *base.step_times]
        # Generous: a compiled candidate pays tens of seconds of start-up before its first step.
        self.timeout_s = max(180.0, 6 * base.wall_s)

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

    def wait_for_quiet(self, why: str) -> None:
        """Wait for the machine to be quiet, within what is left of ``--wait-for-quiet`` (experiment/quiet.py)."""
        self.runner.quiet.wait(why)

    def execute(self, candidate: Candidate, kind: str, *, abort_step_time: float | None = None,
                reason: str = "", exclusive: tuple[str, ...] = (), steps: int | None = None) -> TrialResult | None:
        """Run one trial and record it. With ``exclusive`` kinds, a candidate another worker began
        first (as one of those kinds) is given up before it runs: None is returned. A disturbed
        trial is recorded and rerun (after waiting for quiet when asked; experiment/trial_runner.py)."""
        first = self.store.begin(candidate, kind)
        if exclusive:
            earlier = self.store.earlier_duplicate(first, exclusive)
            if earlier is not None:
                self.store.give_up(first, earlier)
                return None

        def record(candidate: Candidate, disturbed: Attempt | None, measure: Callable[[], TrialResult]) -> Attempt:
            trial = first if disturbed is None else self.store.begin(candidate, kind)
            return self._recorded(trial, kind, reason, disturbed, measure)

        def before_last(stayed: Attempt) -> None:
            self._renormalize(stayed.number)

        ran = self.runner.run(self._args(self.store.candidate_of(first), abort_step_time, steps,
                                         hold_startup=kind == "verification"),
                              record=record, before_last=before_last)
        if kind in BUDGETED:
            self.started += 1
        return ran.result

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
        if idle <= self.runner.quiet.limit_cores or self.baseline is None:  # the normal's limit (``judge_by``)
            return
        self.on_event(Event("run", "log", f"trial {disturbed} stayed disturbed: other processes use {idle:.2f} of the "
                                          f"job's {len(cores)} cores; measuring the machine's new normal with a baseline trial"))
        trial = self.store.begin(self.baseline, quiet.NORMAL)
        args = self._args(self.store.candidate_of(trial))
        reason = f"the machine's normal measured again (trial {disturbed} stayed disturbed)"
        measured = self._recorded(trial, quiet.NORMAL, reason, None, lambda: self.runner.once(args))
        base = measured.result
        if base.status not in (TrialStatus.OK, TrialStatus.DISTURBED) or not base.step_time:
            # The normal stays doctor's; the record says why, so a rerun left disturbed is explained.
            failed = f"{base.status.value}: {base.detail.splitlines()[0] if base.detail else 'no measured step'}"
            self.renormalized.append(Renormalization(after_trial=disturbed, trial=measured.number, stopped=False,
                                                     failed=failed))
            self.on_event(Event("run", "log", f"the machine's normal could not be measured again (trial "
                                              f"{measured.number} ended {failed}); later trials are judged as before"))
            return
        background = measured_background([base.interference], idle)
        self.runner.judge_by(background)
        if self.baseline_step_s:
            self.runner.slowdown = max(1.0, base.step_time / self.baseline_step_s)
        slowdown = self.runner.slowdown
        stopped = slowdown > quiet.MAX_SLOWDOWN
        self.renormalized.append(Renormalization(after_trial=disturbed, trial=measured.number, stopped=stopped,
                                                 background=background, slowdown=round(slowdown, 3)))
        if stopped:
            raise MachineChanged(
                f"the machine stayed busy from trial {disturbed} on: other processes use "
                f"{background.normal_cores:.2f} of the job's {len(cores)} cores and the baseline runs "
                f"{slowdown:.1f}x slower than at the start (trial {measured.number}; at most "
                f"{quiet.MAX_SLOWDOWN}x is measured on)")
        self.on_event(Event("run", "log", f"the machine's normal is now {background.normal_cores:.2f} cores of "
                                          f"other processes (a trial above {background.limit_cores:.2f} is disturbed)"))

    def _args(self, candidate: Candidate, abort_step_time: float | None = None, steps: int | None = None,
              hold_startup: bool = False) -> TrialArgs:
        """A trial of ``candidate`` as the study stored it, held to the baseline's measurement;
        ``hold_startup``: to doctor's start-up too, unless the candidate declares a one-off cost."""
        declared = declared_startup(self.contract, candidate)
        return TrialArgs(
            candidate=candidate,
            steps=steps,
            abort_step_time=abort_step_time,
            baseline_steps=tuple(self.baseline_steps),
            one_off_warmup=declared is None,
            timeout_s=self.timeout_s,
            numerics_by_design=numerics_by_design(candidate),
            startup_limit_s=self.startup_limit_s if hold_startup and declared == 0.0 else None,
        )

    def _recorded(self, trial: RunningTrial, kind: str, reason: str, disturbed: Attempt | None,
                  measure: Callable[[], TrialResult]) -> Attempt:
        """``trial`` run by ``measure`` and recorded; ``disturbed``: the attempt it reruns."""
        rerun_of = disturbed.number if disturbed is not None else None
        words = reason if rerun_of is None else quiet.rerun_reason(rerun_of, reason)
        self.store.explain(trial, words, rerun_of=rerun_of)
        began = time.monotonic()
        try:
            with self.store.heartbeat(trial):
                result = measure()
        except KeyboardInterrupt:
            self.store.interrupted(trial, time.monotonic() - began)
            raise
        self.store.finish(trial, result)
        step = f"{result.step_time * 1000:.1f} ms/step" if result.step_time else result.detail[:80]
        self.on_event(Event(stage="run", kind="report", message=f"trial {trial.number} ({kind}): {result.status.value}, {step}",
                            done=self.started, total=self.max_trials,
                            data={"number": trial.number, "kind": kind, "status": result.status.value,
                                  "candidate": self.store.candidate_of(trial).to_dict(), "step_s": result.step_time,
                                  "wall_s": result.wall_s}))
        return Attempt(trial.number, result, rerun_of, name=f"trial {trial.number}")
