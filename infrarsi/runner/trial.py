"""One trial: a candidate run for real in a copy of the repo, watched, measured and judged.

Every trial ends with exactly one status (see :class:`TrialStatus`); failures are values, and
their wall time is their cost. The user's working tree is only read; logs and the launcher's
records go to ``log_dir`` (by default ``<repo>/.infrarsi/trials/<id>/``).

The job runs as its command says, unchanged; the launcher (:mod:`infrarsi.launcher`) loads before
its code, observes its steps through torch's hooks and sends one record per step over a FIFO in the
workspace, timed here on arrival (:mod:`infrarsi.runner.measure`); after each step it waits for this
process's word to go on or stop (:mod:`infrarsi.launcher.control`), so the job never knows its
length. The whole process is timed too, launch to exit, and the parameters it ends with are hashed
here: the figures verification decides on.
"""

from __future__ import annotations

import signal
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from infrarsi.background import Background
from infrarsi.byte_units import GIB
from infrarsi.contract import Contract
from infrarsi.events import Event, EventSink, ignore
from infrarsi.launcher import launcher_env
from infrarsi.launcher.channel import RecordChannel
from infrarsi.launcher.control import StepControl
from infrarsi.launcher.settings import settings_env
from infrarsi.records.files import trials_dir
from infrarsi.runner import abort, accounting, bytecode, checks, sandbox
from infrarsi.runner.command import (
    build_argv,
    job_steps,
    local_ranks,
    patches_to_apply,
    source_knobs,
    trial_knob_values,
)
from infrarsi.runner.environment import interpreter_env, trial_environment
from infrarsi.runner.interference import InterferenceMonitor, TrialInterference
from infrarsi.runner.measure import RunReport, Step, StepFeed, mean_phases, split_warmup
from infrarsi.runner.process import TrialProcess, interrupt_guard
from infrarsi.runner.watchdog import MemoryWatchdog
from infrarsi.runner.workspace import Workspace, WorkspaceError
from infrarsi.trials import Candidate, TrialResult, TrialStatus

POLL_S = 0.05
"""How often the run's reports are read and the stop conditions checked."""

RECORDS_FILE = "records.jsonl"
"""The launcher's records as they arrived, copied into log_dir at the end of the trial."""


@dataclass(kw_only=True, slots=True)
class TrialSpec:
    repo: Path
    contract: Contract
    candidate: Candidate
    steps: int | None = None
    """Steps to run (default: the contract's warm-up + measured steps)."""
    timeout_s: float | None = None
    """Wall-clock limit of the run from launch (None: no limit)."""
    abort_step_time: float | None = None
    """Stop as aborted_slow once the measured steps are clearly slower than this (seconds)."""
    one_off_warmup: bool = False
    """The candidate declares a one-off cost paid in its first steps (compilation): its warm-up is
    never a reason to abort it; its measured steps still are."""
    baseline_steps: list[float] = field(default_factory=list)
    """The baseline's time of each step by index, warm-up included: for the abort bound each step
    is compared with the baseline's same step (``abort.like_baseline``), so periodic work the
    baseline does too (an evaluation at step 0) never aborts a run."""
    check_loss: bool = True
    """Compare losses with the contract's reference (NaN and inf are always failures)."""
    numerics_by_design: bool = False
    """Judge losses with the looser ``loss.numerics_tolerance`` (bf16, tf32…)."""
    log_dir: Path | None = None
    budget_bytes: int | None = None
    """Memory budget (default: the contract's)."""
    sandbox: bool = True
    """Run inside the bubblewrap sandbox (False: the user's --no-sandbox; see runner/sandbox.py)."""
    reference_checksums: dict[int, list[float]] = field(default_factory=dict)
    """The baseline's parameters after each length doctor ran (doctor's ``checksums``, by step
    count): with ``check_loss``, a run of one of those lengths must end with the same ones
    (``accounting.checksum_problem``)."""
    reassociation_drift: dict[int, float] = field(default_factory=dict)
    """How far doctor's reorder-only run ended from those parameters, by step count (doctor's
    ``reassociation_drift``): the parameter check allows ``LOSS_SAFETY`` times it at that length."""
    background: Background | None = None
    """Doctor's normal background (runner/interference.py): a step beyond it is disturbed, never
    counts toward aborting the run as slow, and a run disturbed overall ends ``disturbed``. None:
    interference is recorded, nothing is judged disturbed (doctor's own runs measure the normal)."""
    startup_limit_s: float | None = None
    """A start-up longer than this (doctor's ``startup_limit_s``) ends the run ``disturbed``: an
    earlier process left the machine slower for the next one (page cache evicted, /dev/shm filled,
    a leftover thread). Verification holds every run of a candidate that declares no one-off
    start-up to it; None: start-up is not judged."""
    on_event: EventSink = ignore

    def __post_init__(self) -> None:
        for name in ("steps", "timeout_s", "abort_step_time", "budget_bytes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"TrialSpec.{name} must be positive, got {value!r}")

    @property
    def total_steps(self) -> int:
        return self.steps or self.contract.workload.total_steps


def default_log_dir(repo: Path) -> Path:
    unique = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
    return trials_dir(repo) / unique


def run_trial(spec: TrialSpec) -> TrialResult:
    """Run ``spec.candidate`` once and judge it. Ctrl-C or SIGTERM kills the run's whole process
    tree and then raises KeyboardInterrupt."""
    # Before the clock: the prefix compiles the environment once (about 30 s), no trial's cost.
    prefix = bytecode.warm(spec.repo) if spec.sandbox else None
    started = time.perf_counter()
    # Absolute: the trial runs in the workspace, where a relative path names another place.
    log_dir = (Path(spec.log_dir) if spec.log_dir is not None else default_log_dir(spec.repo)).resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    result = TrialResult(
        status=TrialStatus.CRASH,
        candidate=spec.candidate,
        log_path=str(log_dir / "output.log"),
        probe_path=str(log_dir / RECORDS_FILE),
    )
    spec.on_event(Event("trial", "begin", f"trial {spec.candidate.key()}", 0, spec.total_steps,
                        {"log_dir": str(log_dir)}))
    _Trial(spec, result, prefix).run()
    result.wall_s = time.perf_counter() - started
    spec.on_event(Event("trial", "end", f"{result.status.value}: {result.detail}".rstrip(": "),
                        data={"status": result.status.value, "wall_s": result.wall_s}))
    return result


class _Trial:
    """The steps of one trial, each filling in ``result``."""

    def __init__(self, spec: TrialSpec, result: TrialResult, prefix: Path | None):
        self.spec = spec
        self.prefix = prefix
        """The shared bytecode prefix the sandbox mounts (``bytecode.warm``); None unsandboxed."""
        self.contract = spec.contract
        self.result = result
        self.log_path = Path(result.log_path)
        self.probe_path = Path(result.probe_path)
        self.budget = spec.budget_bytes or spec.contract.memory.budget_bytes
        self.process: TrialProcess | None = None
        self.exited_by_itself = False
        """The job's process exited before anything here killed it."""
        self.values: dict = {}
        self.monitor: InterferenceMonitor | None = None
        self.step_disturbed: dict[int, bool] = {}
        """Each step's verdict once its window was read (the steps seen so far are judged every poll)."""

    def fail(self, status: TrialStatus, detail: str) -> None:
        self.result.status = status
        self.result.detail = detail

    def run(self) -> None:
        problem = checks.candidate_problem(self.contract, self.spec.candidate)
        if problem:
            return self.fail(TrialStatus.CONTRACT, problem)
        problem = sandbox.bwrap_problem() if self.spec.sandbox else None
        if problem:
            return self.fail(TrialStatus.CRASH, problem)
        with interrupt_guard(self._interrupted):
            try:
                workspace = Workspace(self.spec.repo, mounted=tuple(self.contract.sandbox_policy.read_only))
            except WorkspaceError as err:
                return self.fail(TrialStatus.CONTRACT, str(err))
            try:
                if self._prepare(workspace):
                    self._launch_and_watch(workspace)
            finally:
                if self.process is not None:
                    self.process.kill()
                workspace.remove()

    def _interrupted(self) -> None:
        if self.process is not None:
            self.process.kill()

    def _prepare(self, workspace: Workspace) -> bool:
        """Patches and knob values into the copy; False when the candidate cannot be built."""
        problem = checks.scope_problem(self.contract, [], workspace.root)
        if problem:
            self.fail(TrialStatus.CONTRACT, problem)
            return False
        patches = patches_to_apply(self.contract, self.spec.candidate)
        if patches:
            failure = workspace.apply_patches(patches, self.contract)
            problem = checks.scope_problem(self.contract, workspace.changed(), workspace.root)
            if problem:
                self.fail(TrialStatus.CONTRACT, f"patches {list(patches)}: {problem}")
                return False
            if failure:
                reason, breaks_scope = failure
                self.fail(TrialStatus.CONTRACT if breaks_scope else TrialStatus.CRASH, reason)
                return False
        self.values = trial_knob_values(self.contract, self.spec.candidate.knobs, job_steps(self.contract))
        unwritten = workspace.write_knobs(source_knobs(self.contract, self.values))
        if unwritten:
            self.fail(TrialStatus.CRASH, unwritten)
            return False
        self.result.hunks = workspace.hunks()
        workspace.mark_prepared()
        return True

    def _launch_and_watch(self, workspace: Workspace) -> None:
        argv = build_argv(self.contract, self.values)
        settings = settings_env(self.contract, self.values)
        (self.log_path.parent / "command.txt").write_text(
            " ".join([*(f"{k}={v}" for k, v in settings.items()), *argv]) + "\n")
        policy = self.contract.sandbox_policy
        cwd = workspace.root / self.contract.workload.cwd
        talk = workspace.private / "launcher"
        talk.mkdir(mode=0o700)
        # The control and the feed judge step records by one rule, for the same number of streams.
        ranks = local_ranks(self.contract, argv)
        control = StepControl(talk, self.spec.total_steps, ranks=ranks)
        channel = RecordChannel(talk / "records.fifo", answer=control.answer)
        command, pycache = argv, workspace.pycache
        if self.spec.sandbox:
            pycache = Path(sandbox.BYTECODE_MOUNT)
            mounts = sandbox.Mounts(workspace=workspace.private, cwd=cwd, repo=self.spec.repo,
                                    read_only=[Path(p) for p in policy.read_only], network=policy.network,
                                    bytecode=self.prefix)
            command = sandbox.wrap(argv, mounts)
        declared = self.contract.workload.env  # the owner's command's K=V prefix
        env = trial_environment(home=workspace.home, declared=declared,
                                runner={**interpreter_env(pycache=pycache),
                                        **settings,
                                        **launcher_env(channel.path, warmup_steps=self.contract.workload.warmup_steps,
                                                       pythonpath=declared.get("PYTHONPATH"),
                                                       cuda_budget=self.budget if self.contract.memory.device == "cuda"
                                                       else None)})
        launched = time.monotonic()
        try:
            process = self.process = TrialProcess(command, cwd=cwd, env=env, log_path=self.log_path)
        except OSError as err:
            channel.close()
            control.close()
            return self.fail(TrialStatus.CRASH, f"could not start {argv[0]}: {err}")
        try:
            self._watch_launched(process, channel, control, ranks, launched, workspace)
        finally:
            channel.close()
            control.close()
            channel.save(self.probe_path)

    def _watch_launched(self, process: TrialProcess, channel: RecordChannel, control: StepControl, ranks: int | None,
                        launched: float, workspace: Workspace) -> None:
        on_cpu = self.contract.memory.device == "cpu"
        # On a GPU the budget is device memory, judged from the probe's exit event; the host RSS
        # is still watched for the record.
        watchdog = MemoryWatchdog(process, self.budget if on_cpu else None, lambda _: process.kill(),
                                  per_rank=self.contract.workload.launcher == "torchrun")
        feed = StepFeed(channel.take, ranks=ranks, launched_at=launched)
        monitor = self.monitor = InterferenceMonitor(
            process.pid, lambda: [p.pid for p in process.members(refresh=False)], cgroup=process.containment.cgroup,
            cuda=self.contract.memory.device == "cuda")
        control.before_stop = monitor.sample
        watchdog.start()
        monitor.start()
        try:
            verdict = self._watch(process, feed, watchdog)
        finally:
            process.kill()
            watchdog.stop()
            monitor.stop()
        channel.close()
        report = feed.finish()
        self._measure(report, watchdog)
        self._whole_process(process, report, control, launched)
        disturbed = (self._interference(process, monitor, report, control, launched)
                     or accounting.startup_jumped(self.result.startup_s, self.spec.startup_limit_s))
        tampered = self._run_tampering(workspace)
        if tampered:
            return self.fail(TrialStatus.CONTRACT, tampered)
        if verdict is not None and verdict[0] is TrialStatus.ABORTED_SLOW and not self.result.step_times:
            # Stopped during warm-up (far slower than the bound): the steps after the first are the
            # evidence, and the time model needs them to learn that this setting is slow.
            self.result.step_times = [s.dt for s in report.steps[1:]]
        if verdict is None:
            verdict = self._judge_exit(process, report) or self._judge_accounts(process, report, launched)
        if disturbed and (verdict is None or verdict[0] in (TrialStatus.ABORTED_SLOW, TrialStatus.TIMEOUT)):
            # Slow because the machine was taken, not because of the candidate.
            verdict = TrialStatus.DISTURBED, disturbed + (f" (it would have ended {verdict[0].value})" if verdict else "")
        if verdict is not None:
            self.fail(*verdict)
        else:
            self.result.status = TrialStatus.OK

    def _run_tampering(self, workspace: Workspace) -> str | None:
        """What the run changed in its own sources or bytecode (a locked file rewritten and
        reloaded, a module or .pyc planted for a later import): a contract failure whatever the
        run reported, since what it ran is no longer what was checked."""
        problem = checks.scope_problem(self.contract, [], workspace.root)
        if problem:
            return f"during the run: {problem}"
        written = workspace.run_writes()
        if written:
            return (f"the run wrote {written[0]}" + (f" and {len(written) - 1} more" if len(written) > 1 else "")
                    + ": a trial may not create or change modules, bytecode or links while it runs")
        return None

    def _watch(self, process: TrialProcess, feed: StepFeed, watchdog: MemoryWatchdog) -> tuple[TrialStatus, str] | None:
        """Until the run exits or must be stopped; the status that stopped it, if one did."""
        spec = self.spec
        deadline = process.started + spec.timeout_s if spec.timeout_s else None
        seen: list[Step] = []
        while True:
            exited = process.poll() is not None
            self.exited_by_itself = exited
            new = feed.poll()
            seen.extend(new)
            for step in new:
                spec.on_event(Event("trial", "report", f"step {step.index}: loss {step.loss:.4g}, {step.dt:.3f} s",
                                    len(seen), spec.total_steps,
                                    {"step": step.index, "dt": step.dt, "loss": step.loss}))
            if feed.report.problem:
                return TrialStatus.CONTRACT, feed.report.problem
            if watchdog.exceeded_at is not None:
                what = f"rank {watchdog.exceeded_rank}'s RSS" if watchdog.per_rank else "tree RSS"
                return TrialStatus.OOM, self._oom_detail(watchdog.exceeded_at, what)
            verdict = self._early_verdict(seen)
            if verdict is not None:
                return verdict
            if exited:
                return None
            if deadline is not None and time.perf_counter() > deadline:
                return TrialStatus.TIMEOUT, (
                    f"still running after {spec.timeout_s:g} s ({len(seen)} of {spec.total_steps} steps reported)"
                )
            time.sleep(POLL_S)

    def _early_verdict(self, seen: list[Step]) -> tuple[TrialStatus, str] | None:
        """Stop as soon as the outcome is known: wrong tokens, broken loss, clearly too slow."""
        problem = checks.tokens_problem(seen, self.contract.workload.tokens_per_step,
                                        self.contract.workload.samples_per_step)
        if problem:
            return TrialStatus.CONTRACT, problem
        problem = checks.loss_problem(seen, self.contract.loss, compare=self.spec.check_loss,
                                      by_design=self.spec.numerics_by_design)
        if problem:
            return TrialStatus.NUMERICS, problem
        warmup = self.contract.workload.warmup_steps
        _, measured = split_warmup(self._undisturbed(seen), warmup, self.spec.total_steps)
        times = self._ordinary(measured)
        like = " (each against the baseline's step of the same index)" if self.spec.baseline_steps else ""
        if abort.clearly_slower(times, self.spec.abort_step_time):
            return TrialStatus.ABORTED_SLOW, (
                f"median of {len(times)} measured steps{like} {statistics.median(times):.3g} s is above "
                f"the bound {self.spec.abort_step_time:.3g} s by more than {abort.MARGIN:.0%}"
            )
        later = [] if self.spec.one_off_warmup else self._ordinary(self._undisturbed(seen[1:]))
        if abort.far_slower(later, self.spec.abort_step_time):
            return TrialStatus.ABORTED_SLOW, (
                f"median of {len(later)} steps after the first{like} {statistics.median(later):.3g} s is more than "
                f"{abort.FAR:g}x the bound {self.spec.abort_step_time:.3g} s"
            )
        return None

    def _ordinary(self, steps: list[Step]) -> list[float]:
        return abort.like_baseline([(s.index, s.dt) for s in steps], self.spec.baseline_steps,
                                   self.contract.workload.warmup_steps)

    def _undisturbed(self, steps: list[Step]) -> list[Step]:
        """The steps that may count as slow: read by the interference monitor and not disturbed
        (a step whose window it has not sampled past yet waits for the next poll)."""
        limits, monitor = self.spec.background, self.monitor
        if limits is None or monitor is None:  # the monitor: started before the first poll
            return steps
        out = []
        for s in steps:
            if s.index not in self.step_disturbed:
                if s.ended_at is None or not monitor.covers(s.ended_at):
                    continue
                w = monitor.window(s.ended_at - s.dt, s.ended_at)
                self.step_disturbed[s.index] = w is not None and w.disturbed(limits)
            if not self.step_disturbed[s.index]:
                out.append(s)
        return out

    def _interference(self, process: TrialProcess, monitor: InterferenceMonitor, report: RunReport,
                      control: StepControl, launched: float) -> str:
        """Record who else used the machine, step by step; why the run is disturbed (empty: it is not)."""
        record = TrialInterference(cores=len(monitor.cores), limits=self.spec.background,
                                   measured_from=min(self.contract.workload.warmup_steps, max(self.spec.total_steps - 1, 0)))
        if self.result.startup_s:
            record.startup = monitor.window(launched, launched + self.result.startup_s)
        ended = [t for t in (control.stopped_at(), process.exited_at) if t is not None]
        job_ended = min(ended) if ended else None
        record.steps = [monitor.window(s.ended_at - s.dt, s.ended_at, job_ended=job_ended)
                        if s.ended_at is not None else None for s in report.steps]
        self.result.interference = record.to_dict()
        return record.disturbed()

    def _measure(self, report: RunReport, watchdog: MemoryWatchdog) -> None:
        r = self.result
        workload = self.contract.workload
        warmup, measured = split_warmup(report.steps, workload.warmup_steps, self.spec.total_steps)
        r.warmup_times = [s.dt for s in warmup]
        r.step_times = [s.dt for s in measured]
        r.losses = [s.loss for s in report.steps]
        r.tokens_per_step = _reported([s.tokens for s in report.steps], workload.tokens_per_step)
        r.samples_per_step = _reported([s.samples for s in report.steps], workload.samples_per_step)
        r.phases = mean_phases(measured)
        r.model_facts = report.model_facts
        r.source = report.source
        r.steps_run = len(report.steps)
        r.steps_per_epoch = report.steps_per_epoch
        if report.flops_per_step is not None:
            r.flops_per_step, r.flops_source = float(report.flops_per_step), "FlopCounterMode"
        if report.exit_device == "cuda":
            r.peak_bytes = report.exit_peak_bytes
        elif self.contract.memory.device == "cuda":
            # Killed before the probe's exit record: the device peak is unknown, and the host's
            # RSS is not it (the memory model would read it as device memory).
            r.peak_bytes = None
        else:
            # Each rank at the higher of the watchdog's samples and its own exit high-water mark (a
            # trial is one node: a record's global rank is the watchdog's local one).
            ranks = watchdog.rank_peaks.keys() | report.exit_rank_peaks.keys()
            peaks = [max(watchdog.rank_peaks.get(k, 0), report.exit_rank_peaks.get(k, 0)) for k in sorted(ranks)]
            r.peak_bytes = max(peaks, default=0) or None
            r.rank_peak_bytes = peaks
        r.startup_s = report.startup_s

    def _whole_process(self, process: TrialProcess, report: RunReport, control: StepControl, launched: float) -> None:
        """Launch to exit, launch to the stop, and the parameters the job ended with, hashed here:
        nothing the job reports enters these."""
        r = self.result
        stopped_at = control.stopped_at()
        if stopped_at is not None:
            r.stopped_s = stopped_at - launched
            if self.exited_by_itself and process.exited_at is not None:
                r.process_s = process.exited_at - launched
        if report.params_pids:
            r.param_checksum = accounting.params_checksum(
                [control.directory / f"params-{pid}.pt" for pid in report.params_pids])

    def _judge_exit(self, process: TrialProcess, report: RunReport) -> tuple[TrialStatus, str] | None:
        """The status of a run that ended by itself."""
        code = process.returncode
        assert code is not None  # it ended, so it has its exit code
        steps = report.steps
        if report.problem:
            return TrialStatus.CONTRACT, report.problem
        if code != 0:
            tail = checks.log_tail(self.log_path)
            problem = checks.loss_problem(steps, self.contract.loss, compare=False, by_design=False)
            if problem:
                return TrialStatus.NUMERICS, f"{problem}; then the run failed ({_exit_words(code)})"
            error = checks.memory_error_line(checks.log_tail(self.log_path, checks.MEMORY_TAIL_LINES))
            if error is not None:
                return TrialStatus.OOM, f"ran out of memory ({_exit_words(code)}): {error}\n{tail}"
            return TrialStatus.CRASH, f"{_exit_words(code)}:\n{tail}"
        if not steps:
            return TrialStatus.CRASH, (
                "the run exited and the launcher saw no step: no process of the job imported torch and "
                "then called backward() or an optimizer's step() (a `python -S`, `-E` or `-I` job never loads "
                f"the launcher); records in {self.probe_path.name}, output in {self.log_path.name}"
            )
        if len(steps) < self.spec.total_steps:
            return TrialStatus.CRASH, f"the run stopped after {len(steps)} of {self.spec.total_steps} steps"
        problem = checks.unsized_steps_problem(steps, self.contract.workload)
        if problem:
            return TrialStatus.CONTRACT, problem
        if report.exit_device == "cuda" and report.exit_peak_bytes and report.exit_peak_bytes > self.budget:
            return TrialStatus.OOM, self._oom_detail(report.exit_peak_bytes, "device memory")
        return None

    def _judge_accounts(self, process: TrialProcess, report: RunReport, launched: float
                        ) -> tuple[TrialStatus, str] | None:
        """A run that ended well by itself: does its time add up, and did it train the baseline's model?"""
        r = self.result
        run_s = process.exited_at - launched if process.exited_at is not None else None
        problem = accounting.time_problem(run_s, r.startup_s, [*r.warmup_times, *r.step_times])
        if problem:
            return TrialStatus.CONTRACT, problem
        reference = self.spec.reference_checksums.get(self.spec.total_steps)
        loss = self.contract.loss
        if self.spec.check_loss and reference:
            tolerance = loss.numerics_tolerance if self.spec.numerics_by_design else loss.tolerance
            compared = min(loss.compare_steps, len(loss.reference), len(r.losses))
            exact = compared > 0 and r.losses[:compared] == loss.reference[:compared]
            drift = accounting.drift_at(self.spec.reassociation_drift, self.spec.total_steps)
            problem = accounting.checksum_problem(r.param_checksum, reference, exact_losses=exact,
                                                  rtol=accounting.checksum_tolerance(tolerance, loss.reference, drift))
            if problem:
                return TrialStatus.NUMERICS, problem
            if r.param_checksum is None:
                return TrialStatus.CONTRACT, ("the run ended without the launcher's parameter checksum: "
                                              "what it trained cannot be compared with the baseline")
        return None

    def _oom_detail(self, level: int, what: str) -> str:
        return f"{what} reached {level / GIB:.2f} GiB ({level} bytes), above the budget of {self.budget / GIB:.2f} GiB"


def _reported(values: list[int | None], expected: int | None) -> int | None:
    """What the steps reported: the first value other than the contract's, if any, else the first."""
    present = [v for v in values if v is not None]
    reported = [v for v in present if v != expected] or present
    return reported[0] if reported else None


def _exit_words(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
