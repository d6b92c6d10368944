"""How every stage runs a trial on this machine: a measurement once, or a trial rerun while other
processes disturbed it, after waiting for quiet (``experiment/quiet.py``), each attempt's
provenance kept as a field.

Doctor (its claim probes, ``stages/claims.py``, included), run (``experiment/session.py``, which
records each attempt in its study) and verify all run their trials through a ``TrialRunner``, each
built by ``TrialRunner.for_stage``; no stage calls ``runner.trial.run_trial`` itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from infrarsi.background import Background, busy_limit
from infrarsi.contract import Contract
from infrarsi.events import Event, EventSink, ignore
from infrarsi.experiment import quiet
from infrarsi.experiment.quiet import QuietWaiter
from infrarsi.records import DoctorReport
from infrarsi.runner.interference import job_cores
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialResult


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialArgs:
    """What one trial runs; the rest of its ``TrialSpec`` is the runner's."""

    candidate: Candidate
    name: str = "a trial"
    """How the runner's events call it (``f"{name} disturbed, rerun: …"``)."""
    steps: int | None = None
    log_dir: Path | None = None
    """A rerun's logs go beside it, in ``<log_dir>-rerun<attempt>``."""
    check_loss: bool = True
    abort_step_time: float | None = None
    timeout_s: float | None = None
    """Both bounds before the runner's ``slowdown`` stretches them."""
    baseline_steps: tuple[float, ...] = ()
    one_off_warmup: bool = False
    numerics_by_design: bool = False
    startup_limit_s: float | None = None
    """A longer start-up is a disturbance (``TrialSpec.startup_limit_s``)."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One run of a trial: the first, or a rerun of a disturbed one."""

    number: int
    """Who records it numbers it: the study trial's number in a run, else its place (0: the first)."""
    result: TrialResult
    rerun_of: int | None = None
    """The number of the disturbed attempt it reruns; None for the first."""
    name: str = ""
    """How events call it: ``trial 12`` in a run, the trial's ``TrialArgs.name`` elsewhere."""


@dataclass(frozen=True, slots=True)
class Attempts:
    """Every attempt at one trial, in order: each rerun names the one it repeats (``rerun_of``)."""

    attempts: tuple[Attempt, ...]

    @property
    def result(self) -> TrialResult:
        """The last attempt's result: undisturbed, or disturbed after ``quiet.MAX_RERUNS`` reruns."""
        return self.attempts[-1].result


Record = Callable[[Candidate, Attempt | None, Callable[[], TrialResult]], Attempt]
"""Records one attempt where its caller keeps trials (the run's study): given the candidate, the
disturbed attempt it reruns (None: the first) and what runs it; it runs it and numbers it. Whoever
records an attempt also reports it."""


def normal_background(doctor: DoctorReport | None) -> Background:
    """The machine's normal a stage after doctor judges its trials by: doctor's, or an unmeasured
    machine's where doctor measured none (no report, or one older than the measure)."""
    return (doctor.background if doctor else None) or Background.unmeasured(len(job_cores()))


@dataclass(slots=True, kw_only=True)
class TrialRunner:
    """What every trial of a stage on this machine shares: the repository and contract, the
    sandbox, the normal background a trial is judged against and the budget of waiting for quiet."""

    repo: Path
    contract: Contract
    stage: str
    """The stage its events are said for."""
    quiet: QuietWaiter
    """The stage's budget of waiting for quiet: spent before each rerun."""
    background: Background | None = None
    """The machine's normal (doctor's measure, or the run's again): beyond it a trial is disturbed
    and rerun. None: interference is recorded, nothing is disturbed (doctor's baseline runs measure
    the normal)."""
    sandbox: bool = True
    on_event: EventSink = ignore
    show_trials: bool = False
    """The trials' own events (each step) go to ``on_event`` too: doctor shows its runs as they go;
    run and verify report each trial when it ends."""
    reference_checksums: dict[int, list[float]] = field(default_factory=dict)
    """Doctor's ``checksums``: the run's trials are held to them (``TrialSpec.reference_checksums``)."""
    reassociation_drift: dict[int, float] = field(default_factory=dict)
    """Doctor's ``reassociation_drift``: how far from those checksums a trial may end."""
    slowdown: float = 1.0
    """How much slower the baseline runs under the machine's current normal than it did first (the
    run measures the normal again: ``TrialSession._renormalize``): every trial's ``abort_step_time``
    and ``timeout_s`` are stretched by it."""

    @classmethod
    def for_stage(cls, repo: Path, contract: Contract, stage: str, *, background: Background | None,
                  held_to: DoctorReport | None = None, wait_for_quiet: float | None = None, sandbox: bool = True,
                  on_event: EventSink = ignore, show_trials: bool = False) -> TrialRunner:
        """The runner of ``stage``'s trials. ``background``: the normal they are judged by
        (``normal_background``), quiet below its limit; None while they measure it (doctor's
        baseline runs): nothing is disturbed, and the machine is quiet below ``busy_limit``.
        ``held_to``: the report whose checksums and reassociation drift the trials' parameters are
        held to (the run's; verify's trees are not doctor's baseline). ``wait_for_quiet``: seconds
        the whole stage may wait for quiet (None: it never waits)."""
        limit = background.limit_cores if background is not None else busy_limit(len(job_cores()))
        return cls(repo=repo, contract=contract, stage=stage, background=background, sandbox=sandbox,
                   on_event=on_event, show_trials=show_trials,
                   quiet=QuietWaiter(limit, wait_for_quiet, stage, on_event),
                   reference_checksums=held_to.checksums if held_to else {},
                   reassociation_drift=held_to.reassociation_drift if held_to else {})

    def judge_by(self, background: Background) -> None:
        """From now on a trial beyond ``background`` is disturbed, and quiet is waited for below it."""
        self.background = background
        self.quiet.limit_cores = background.limit_cores

    def once(self, args: TrialArgs) -> TrialResult:
        """One run, never rerun: a measurement of the machine (doctor's baseline runs, the run's
        normal measured again)."""
        return run_trial(self._spec(args))

    def run(self, args: TrialArgs, *, record: Record | None = None,
            before_last: Callable[[Attempt], None] | None = None) -> Attempts:
        """The trial, and while it is disturbed a rerun after waiting for quiet, at most
        ``quiet.MAX_RERUNS`` times (``quiet.until_undisturbed``). ``record``: where each attempt is
        kept (default: numbered here, each rerun said in an event); ``before_last``: called with the
        attempt still disturbed before the last rerun (the run measures the normal again there)."""
        keep = record or partial(self._attempt, args)
        attempts = [keep(args.candidate, None, lambda: self.once(args))]

        def again(rerun: quiet.Rerun) -> TrialResult:
            disturbed = attempts[-1]
            self.quiet.wait(f"{disturbed.name} was disturbed")
            if rerun.last and before_last is not None:
                before_last(disturbed)
            # Built now: ``before_last`` may have measured the normal and the slowdown again.
            spec = self._spec(args, rerun.attempt)
            attempts.append(keep(spec.candidate, disturbed, lambda: run_trial(spec)))
            return attempts[-1].result

        quiet.until_undisturbed(attempts[0].result, again)
        return Attempts(tuple(attempts))

    def _attempt(self, args: TrialArgs, _candidate: Candidate, disturbed: Attempt | None,
                 measure: Callable[[], TrialResult]) -> Attempt:
        if disturbed is None:
            return Attempt(0, measure(), name=args.name)
        self.on_event(Event(self.stage, "log", f"{args.name} disturbed, rerun: {disturbed.result.detail}"))
        return Attempt(disturbed.number + 1, measure(), rerun_of=disturbed.number, name=args.name)

    def _spec(self, args: TrialArgs, rerun: int = 0) -> TrialSpec:
        log_dir = args.log_dir
        if log_dir is not None and rerun:
            log_dir = log_dir.with_name(f"{log_dir.name}-rerun{rerun}")
        return TrialSpec(
            repo=self.repo,
            contract=self.contract,
            candidate=args.candidate,
            steps=args.steps,
            timeout_s=args.timeout_s * self.slowdown if args.timeout_s else None,
            abort_step_time=args.abort_step_time * self.slowdown if args.abort_step_time else None,
            baseline_steps=list(args.baseline_steps),
            one_off_warmup=args.one_off_warmup,
            check_loss=args.check_loss,
            numerics_by_design=args.numerics_by_design,
            log_dir=log_dir,
            sandbox=self.sandbox,
            reference_checksums=self.reference_checksums,
            reassociation_drift=self.reassociation_drift,
            background=self.background,
            startup_limit_s=args.startup_limit_s,
            on_event=self.on_event if self.show_trials else ignore,
        )
