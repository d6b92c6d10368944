"""The one trial runner every stage uses (experiment/trial_runner.py): what each attempt runs, how
a disturbed one is rerun and what each rerun says it repeats. ``run_trial`` is replaced by a script
of results: no trial runs here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from infrarsi.background import Background, busy_limit
from infrarsi.contract import Contract, LossInvariant, MemoryBudget, Scope, Workload
from infrarsi.events import Event
from infrarsi.experiment import quiet, trial_runner
from infrarsi.experiment.trial_runner import Attempt, TrialArgs, TrialRunner, normal_background
from infrarsi.runner.interference import job_cores
from infrarsi.runner.trial import TrialSpec
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from tests.support.doctor_report import doctor_report


def contract() -> Contract:
    return Contract(workload=Workload(entry="train.py", command=["python", "train.py"], tokens_per_step=128, seq_len=8,
                                      global_batch=16, seed=1, warmup_steps=1, measured_steps=3, planned_steps=10),
                    loss=LossInvariant(compare_steps=4, tolerance=0.0, numerics_tolerance=0.0),
                    memory=MemoryBudget(budget_bytes=2**30), scope=Scope(editable=["train.py"]), knobs=[])


@pytest.fixture
def scripted(monkeypatch):
    """``run_trial`` answering each spec with the next status of ``statuses``; the specs it got."""
    statuses: list[TrialStatus] = []
    specs: list[TrialSpec] = []

    def run_trial(spec: TrialSpec) -> TrialResult:
        specs.append(spec)
        status = statuses.pop(0)
        return TrialResult(status=status, candidate=spec.candidate, detail=f"{status.value} {len(specs)}")

    monkeypatch.setattr(trial_runner, "run_trial", run_trial)
    return statuses, specs


def runner(tmp_path: Path, events: list[Event], background: Background | None) -> TrialRunner:
    return TrialRunner(repo=tmp_path, contract=contract(), stage="doctor", on_event=events.append,
                       background=background, quiet=quiet.QuietWaiter(1.0, None, "doctor", events.append),
                       reference_checksums={4: [1.0, 2.0]})


def test_a_disturbed_trial_is_rerun_with_its_provenance_and_its_own_log_folder(tmp_path, scripted):
    statuses, specs = scripted
    statuses += [TrialStatus.DISTURBED, TrialStatus.DISTURBED, TrialStatus.OK]
    events: list[Event] = []
    normal = Background.unmeasured(2)
    args = TrialArgs(candidate=Candidate(knobs={"threads": 2}), name="the claim's trial", steps=6,
                     log_dir=tmp_path / "claim-threads", check_loss=False, abort_step_time=0.5)
    ran = runner(tmp_path, events, normal).run(args)
    assert [(a.number, a.rerun_of, a.result.status) for a in ran.attempts] == [
        (0, None, TrialStatus.DISTURBED), (1, 0, TrialStatus.DISTURBED), (2, 1, TrialStatus.OK)]
    assert ran.result.status is TrialStatus.OK
    assert [s.log_dir for s in specs] == [tmp_path / "claim-threads", tmp_path / "claim-threads-rerun1",
                                         tmp_path / "claim-threads-rerun2"]
    # Every attempt is the same trial, judged against the same normal, held to the same references.
    assert all(s.candidate == args.candidate and s.steps == 6 and not s.check_loss and s.abort_step_time == 0.5
               and s.background is normal and s.reference_checksums == {4: [1.0, 2.0]} for s in specs)
    assert [e.message for e in events] == ["the claim's trial disturbed, rerun: disturbed 1",
                                           "the claim's trial disturbed, rerun: disturbed 2"]


def test_reruns_stop_at_max_reruns_and_a_measurement_is_never_rerun(tmp_path, scripted):
    statuses, specs = scripted
    statuses += [TrialStatus.DISTURBED] * (quiet.MAX_RERUNS + 2)
    events: list[Event] = []
    run = runner(tmp_path, events, Background.unmeasured(2))
    ran = run.run(TrialArgs(candidate=Candidate()))
    assert len(ran.attempts) == quiet.MAX_RERUNS + 1 and ran.result.status is TrialStatus.DISTURBED
    assert run.once(TrialArgs(candidate=Candidate())).status is TrialStatus.DISTURBED
    assert len(specs) == quiet.MAX_RERUNS + 2 and statuses == []


def test_a_recorder_numbers_the_attempts_and_the_last_rerun_may_remeasure_the_normal_first(tmp_path, scripted):
    """As the run's session uses it: study numbers, and the normal measured again (a slower one
    stretches the bounds of the rerun that follows)."""
    statuses, specs = scripted
    statuses += [TrialStatus.DISTURBED, TrialStatus.DISTURBED, TrialStatus.OK]
    events: list[Event] = []
    run = runner(tmp_path, events, Background.unmeasured(2))
    numbers = iter([7, 9, 12])
    remeasured: list[int] = []
    new_normal = Background(cores=2, idle_cores=0.8, normal_cores=0.8, limit_cores=1.3, busy=False)

    def record(candidate, disturbed, measure) -> Attempt:
        number = next(numbers)
        return Attempt(number, measure(), disturbed.number if disturbed else None, name=f"trial {number}")

    def before_last(stayed: Attempt) -> None:
        remeasured.append(stayed.number)
        run.judge_by(new_normal)
        run.slowdown = 1.2

    ran = run.run(TrialArgs(candidate=Candidate(), abort_step_time=1.0, timeout_s=100.0), record=record,
                  before_last=before_last)
    assert [(a.number, a.rerun_of) for a in ran.attempts] == [(7, None), (9, 7), (12, 9)]
    assert remeasured == [9] and events == []  # the recorder says its attempts, not the runner
    assert [(s.abort_step_time, s.timeout_s, s.background) for s in specs] == [
        (1.0, 100.0, specs[0].background), (1.0, 100.0, specs[0].background), (1.2, 120.0, new_normal)]
    assert run.quiet.limit_cores == new_normal.limit_cores


def test_a_stage_builds_its_runner_from_doctor_s_report_or_to_measure_the_normal(tmp_path):
    normal = Background(cores=2, idle_cores=0.3, normal_cores=0.4, limit_cores=0.9, busy=False)
    doctored = doctor_report(background=normal, checksums={4: [1.0, 2.0]}, reassociation_drift={4: 1e-6})
    assert normal_background(doctored) is normal
    assert normal_background(None) == normal_background(replace(doctored, background=None)) == \
        Background.unmeasured(len(job_cores()))

    # The run: judged by doctor's normal, held to its parameters, waiting up to its budget.
    run = TrialRunner.for_stage(tmp_path, contract(), "run", background=normal, held_to=doctored, wait_for_quiet=30.0)
    assert (run.background, run.quiet.limit_cores, run.quiet.budget_s, run.quiet.stage) == (normal, 0.9, 30.0, "run")
    assert (run.reference_checksums, run.reassociation_drift) == ({4: [1.0, 2.0]}, {4: 1e-6})
    # Verify: the same normal, its trees held to no checksum, never waiting.
    verify = TrialRunner.for_stage(tmp_path, contract(), "verify", background=normal)
    assert (verify.quiet.budget_s, verify.reference_checksums, verify.reassociation_drift) == (None, {}, {})
    # Doctor's baseline runs measure the normal: nothing disturbed, quiet below the busy limit.
    doctor = TrialRunner.for_stage(tmp_path, contract(), "doctor", background=None, show_trials=True)
    assert doctor.background is None and doctor.show_trials
    assert doctor.quiet.limit_cores == busy_limit(len(job_cores()))
