"""Every status from a real run of a real process; the user's tree untouched after each."""

import json
import re
import time
from pathlib import Path

import pytest

from infrarsi.contract import Knob
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus

from .conftest import REFERENCE, TOKENS, reader_lag, tree_digest, trial_processes

pytestmark = pytest.mark.e2e


def trial(repo, contract, knobs=None, **spec_args):
    before = tree_digest(repo)
    events = []
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(knobs=knobs or {}),
                                 on_event=events.append, **spec_args))
    assert tree_digest(repo) == before, "the trial changed the user's tree"
    assert events[0].kind == "begin" and events[-1].kind == "end"
    assert events[-1].data["status"] == result.status.value
    assert result.wall_s > 0
    return result, events


def test_ok_measures_every_step_and_leaves_logs_under_the_state_dir(make_repo):
    repo, contract = make_repo("good.py")
    result, events = trial(repo, contract, {"step_s": 0.05})
    assert result.status is TrialStatus.OK, result.detail
    assert len(result.warmup_times) == 2 and len(result.step_times) == 4
    # The knob reached the script: every step sleeps its 50 ms. (The sum: arrival times jitter by
    # how late InfraRSI's reader woke, so a single step may read a little short.)
    assert sum(result.step_times) >= 4 * 0.05 - reader_lag(result, 1), result.step_times
    assert result.losses == pytest.approx([4.0 * 0.9**i for i in range(6)])
    assert result.tokens_per_step == TOKENS
    assert result.phases["forward"] >= 0.05
    assert result.model_facts["params"] == 1000
    assert 0 < result.startup_s < result.wall_s
    assert 10 * 2**20 < result.peak_bytes < 2 * 2**30
    assert ".infrarsi/trials/" in result.log_path and result.probe_path.endswith("records.jsonl")
    assert result.source == "launcher" and result.samples_per_step == 4
    # The launcher stopped the job at the end of its 6th step, before it printed it...
    log = open(result.log_path).read()
    assert "iter 4: loss" in log and "iter 5: loss" not in log
    # ...after its probe.step() for that step: every step's phases arrived.
    kinds = [json.loads(line)["kind"] for line in open(result.probe_path)]
    assert kinds.count("step") == kinds.count("probe") == 6 and kinds[-1] == "exit"
    # The step knob says the owner's planned length, whatever this run's: InfraRSI stops it.
    assert "--max_iters=1000" in open(result.log_path.replace("output.log", "command.txt")).read()
    assert [e.data["step"] for e in events if e.kind == "report"] == list(range(6))
    assert result.hunks == []


def test_steps_override_and_log_dir(make_repo, tmp_path):
    repo, contract = make_repo("good.py")
    result, _ = trial(repo, contract, steps=3, log_dir=tmp_path / "logs")
    assert result.status is TrialStatus.OK, result.detail
    assert len(result.losses) == 3 and len(result.step_times) == 1
    assert result.log_path == str(tmp_path / "logs" / "output.log")


def test_a_job_without_the_probe_is_measured_by_the_launcher(make_repo):
    repo, contract = make_repo("log_only.py")
    result, _ = trial(repo, contract)
    assert result.status is TrialStatus.OK, result.detail
    assert result.source == "launcher" and len(result.step_times) == 4
    # Each step sleeps 30 ms. Arrival times jitter by how late the reader woke, so single steps may
    # read a little short; their sum cannot (it spans the arrival of the first step to the last).
    assert sum(result.step_times) >= 4 * 0.03 - reader_lag(result, 1), result.step_times
    assert result.losses[:4] == pytest.approx(REFERENCE, rel=1e-6)
    assert result.tokens_per_step == TOKENS and result.samples_per_step == 4
    assert result.phases == {} and result.model_facts == {}


def test_crash_reports_the_error_lines(make_repo):
    repo, contract = make_repo("raises.py")
    result, _ = trial(repo, contract)
    assert result.status is TrialStatus.CRASH
    assert "exit code 1" in result.detail
    assert "RuntimeError: shape mismatch in attention: 8 vs 16" in result.detail
    assert len(result.losses) == 2


def test_nan_loss_is_numerics_and_stops_the_run(make_repo):
    repo, contract = make_repo("goes_nan.py")
    result, _ = trial(repo, contract, check_loss=False)
    assert result.status is TrialStatus.NUMERICS
    assert "loss is nan at step 3" in result.detail


def test_loss_off_the_reference_is_numerics_unless_declared_by_design(make_repo):
    repo, contract = make_repo("good.py")
    result, _ = trial(repo, contract, {"loss_shift": 0.01})
    assert result.status is TrialStatus.NUMERICS
    assert re.search(r"step 0 is 0\.01 off the reference", result.detail), result.detail
    by_design, _ = trial(repo, contract, {"loss_shift": 0.01}, numerics_by_design=True)
    assert by_design.status is TrialStatus.OK, by_design.detail
    unchecked, _ = trial(repo, contract, {"loss_shift": 1.0}, check_loss=False)
    assert unchecked.status is TrialStatus.OK


def test_other_tokens_per_step_break_the_contract(make_repo):
    repo, contract = make_repo("double_tokens.py")
    result, _ = trial(repo, contract)
    assert result.status is TrialStatus.CONTRACT
    assert result.tokens_per_step == 2 * TOKENS
    assert f"{2 * TOKENS} tokens" in result.detail


def test_a_changed_locked_file_or_workload_knob_is_refused_before_running(make_repo):
    repo, contract = make_repo("good.py")
    result, _ = trial(repo, contract, {"batch_size": 8})
    assert result.status is TrialStatus.CONTRACT and "workload" in result.detail
    assert result.losses == []
    (repo / "helpers.py").write_text("SCALE = 2.0\n")
    result, _ = trial(repo, contract)
    assert result.status is TrialStatus.CONTRACT
    assert "locked file helpers.py is changed since init" in result.detail
    assert result.losses == []


def test_clearly_slower_runs_are_aborted_early(make_repo):
    repo, contract = make_repo("good.py")
    started = time.perf_counter()
    result, _ = trial(repo, contract, {"step_s": 0.15}, steps=30, abort_step_time=0.1)
    assert result.status is TrialStatus.ABORTED_SLOW, result.detail
    # 1.5x the bound: two warm-up steps, then three measured ones are enough to be sure.
    assert len(result.step_times) == 3 and len(result.losses) == 5
    assert time.perf_counter() - started < result.startup_s + 30 * 0.15
    # 3x the bound and more: two steps after the first settle it, warm-up or not.
    far, _ = trial(repo, contract, {"step_s": 0.4}, steps=30, abort_step_time=0.1)
    assert far.status is TrialStatus.ABORTED_SLOW and len(far.losses) == 3, far.detail
    assert far.step_times and far.step_time > 3 * 0.1, "the evidence is kept for the time model"
    same_speed, _ = trial(repo, contract, {"step_s": 0.05}, abort_step_time=0.2)
    assert same_speed.status is TrialStatus.OK, same_speed.detail


def test_timeout_kills_the_whole_tree(make_repo):
    repo, contract = make_repo("hangs.py")
    # Long enough for the job to start and report its step on a loaded machine: about 3 s on a quiet
    # one, with the shared bytecode prefix (runner/bytecode.py), whose one-off compile of the
    # environment is not the trial's time.
    result, _ = trial(repo, contract, timeout_s=20.0)
    assert result.status is TrialStatus.TIMEOUT
    assert "still running after 20 s (1 of 6 steps reported)" in result.detail
    assert 20.0 <= result.wall_s < 40
    log = open(result.log_path).read()
    assert "helper pid" in log
    assert not trial_processes(log), "the helper in its own session survived"


def test_flagless_knob_is_written_into_the_copy(make_repo):
    from infrarsi.contract import Knob

    from .conftest import knobs, make_contract

    repo, _ = make_repo("good.py")
    source_knob = Knob(name="step_s", role="unknown", type="float", default=0.02, flag="")
    contract = make_contract(repo, knob_list=[k for k in knobs() if k.name != "step_s"] + [source_knob])
    result, _ = trial(repo, contract, {"step_s": 0.06})
    assert result.status is TrialStatus.OK, result.detail
    assert sum(result.step_times) >= len(result.step_times) * 0.06 - reader_lag(result, 1), result.step_times
    assert [h.path for h in result.hunks] == ["train.py"]
    assert "default=0.06" in result.hunks[0].text


def test_a_reused_log_dir_holds_only_the_latest_run(make_repo, tmp_path):
    repo, contract = make_repo("good.py")
    log_dir = tmp_path / "reused"
    first, _ = trial(repo, contract, {"step_s": 0.01}, log_dir=log_dir)
    second, _ = trial(repo, contract, {"step_s": 0.01}, log_dir=log_dir)
    assert first.ok and second.ok
    assert len(second.losses) == len(first.losses) == contract.workload.total_steps


@pytest.mark.parametrize("how,written", [
    ("locked", "during the run: locked file helpers.py is changed"),
    ("pyc", "the run wrote __pycache__/late."),
    ("module", "the run wrote extra.py"),
    ("symlink", "the run wrote cache"),
])
def test_a_run_that_changes_its_own_sources_breaks_the_contract(make_repo, how, written):
    repo, contract = make_repo("tampers.py")
    (repo / "late.py").write_text('VALUE = "source"\n')
    contract.knobs.append(Knob(name="how", role="unknown", type="str", default="nothing", flag="--how"))
    result, _ = trial(repo, contract, knobs={"how": how})
    assert result.status is TrialStatus.CONTRACT and result.detail.startswith(written), result.detail
    log = Path(result.log_path).read_text()
    # Bytecode is neither read from next to the sources nor written: the planted .pyc lost.
    assert 'late.VALUE = source;' in log and "writes bytecode: False" in log and "pycache prefix /" in log, log


def test_an_honest_run_leaves_no_bytecode_and_stays_ok(make_repo):
    repo, contract = make_repo("tampers.py")
    (repo / "late.py").write_text('VALUE = "source"\n')
    (repo / "__pycache__").mkdir()
    # the user's stale bytecode for late.py is not even copied into the trial
    (repo / "__pycache__" / "late.cpython-311.pyc").write_bytes(b"stale")
    contract.knobs.append(Knob(name="how", role="unknown", type="str", default="nothing", flag="--how"))
    result, _ = trial(repo, contract)
    assert result.ok, result.detail
    assert "late.VALUE = source;" in Path(result.log_path).read_text()


def test_a_start_up_beyond_doctors_is_a_disturbance_not_a_measurement(make_repo):
    """A process that starts much slower than doctor's baseline runs did follows one that left the
    machine slower (issue 49): verification's runs held to doctor's start-up end disturbed."""
    repo, contract = make_repo("good.py")
    held, _ = trial(repo, contract, {"step_s": 0.01}, startup_limit_s=0.01)
    assert held.status is TrialStatus.DISTURBED and "beyond the 0.01 s the baseline's runs in doctor allow" in held.detail
    free, _ = trial(repo, contract, {"step_s": 0.01}, startup_limit_s=held.startup_s + 60)
    assert free.status is TrialStatus.OK, free.detail
