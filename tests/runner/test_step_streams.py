"""The rule for which records are steps (infrarsi/launcher/streams.py), and that the step control
answers exactly the step records the step feed counts (issue 49)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infrarsi.launcher.channel import Arrival
from infrarsi.launcher.control import StepControl
from infrarsi.launcher.streams import StepStreams, Verdict
from infrarsi.runner.measure import StepFeed


def step(i: object, pid: object = 100, rank: object = 0, **fields: object) -> dict:
    return {"kind": "step", "step": i, "pid": pid, "rank": rank, **fields}


def test_a_streams_steps_count_in_order_and_other_records_are_no_steps():
    rule = StepStreams(ranks=1)
    assert rule.judge({"kind": "start", "pid": 100, "rank": 0}) == Verdict()
    assert [rule.judge(step(i)).step for i in range(3)] == [0, 1, 2]
    assert rule.judge({"kind": "exit", "pid": 100, "rank": 0, "steps": 3}) == Verdict()


@pytest.mark.parametrize("identity", [
    {"pid": 7, "rank": None}, {"pid": 7}, {"pid": 7, "rank": "0"}, {"pid": 7, "rank": True},
    {"pid": 7, "rank": -1}, {"pid": 7, "rank": 0.0}, {"pid": "7", "rank": 0}, {"pid": 7.0, "rank": 0},
    {"pid": True, "rank": 0}, {"pid": 0, "rank": 0}, {"pid": -7, "rank": 0}, {"rank": 0},
], ids=repr)
def test_a_step_record_without_the_launchers_pid_and_rank_is_no_step_and_takes_no_place(identity):
    rule = StepStreams(ranks=1)
    record = {"kind": "step", "step": 0, **identity}
    assert [rule.judge(record) for _ in range(3)] == [Verdict()] * 3
    # It took nothing: the run's one stream is still free for its first step.
    assert rule.judge(step(0)).step == 0


def test_out_of_order_steps_and_a_changed_rank_are_not_the_launchers():
    rule = StepStreams(ranks=None)
    assert "reported step 1 after 0 steps" in rule.judge(step(1)).problem
    assert "reported step True after 0 steps" in rule.judge(step(True)).problem
    assert rule.judge(step(0)).step == 0
    repeated = rule.judge(step(0))
    assert repeated.step is None and "reported step 0 after 1 steps" in repeated.problem
    assert "reported step 1.0 after 1 steps" in rule.judge(step(1.0)).problem
    changed = rule.judge(step(1, rank=1))
    assert changed.step is None and "then as rank 1" in changed.problem
    assert rule.judge(step(1)).step == 1


def test_the_run_has_as_many_streams_as_the_command_starts_one_per_rank():
    rule = StepStreams(ranks=2)
    assert rule.judge(step(0, pid=100, rank=0)).step == 0
    duplicate = rule.judge(step(0, pid=300, rank=0))  # a forked child of rank 0, say
    assert duplicate.step is None and "beside pid 100, the run's rank 0" in duplicate.problem
    assert rule.judge(step(0, pid=200, rank=1)).step == 0
    extra = rule.judge(step(0, pid=400, rank=2))
    assert extra.step is None and "beside the 2 stepping process(es)" in extra.problem
    unknown = StepStreams(ranks=None)
    assert [unknown.judge(step(0, pid=100 + r, rank=r)).step for r in range(5)] == [0] * 5
    assert "beside pid 100" in unknown.judge(step(0, pid=300, rank=0)).problem


def _answers(directory: Path, pid: int) -> bytes:
    fd = os.open(directory / f"ctl-{pid}", os.O_RDONLY | os.O_NONBLOCK)
    try:
        return os.read(fd, 64)
    except BlockingIOError:
        return b""
    finally:
        os.close(fd)


def test_the_control_answers_exactly_the_step_records_the_feed_counts(tmp_path):
    """One run of 3 steps: before its step 0 a forged stream the feed drops (rank null), after it a
    stream beside the run's own. Every pid has a control FIFO; only the run's own is answered, once
    for each step the feed counts."""
    forged, real, beside = 7, 100, 200
    for pid in (forged, real, beside):
        os.mkfifo(tmp_path / f"ctl-{pid}")
    records = [step(i, pid=forged, rank=None) for i in range(4)]
    records += [{"kind": "start", "pid": real, "rank": 0}, step(0, pid=real)]
    records += [step(i, pid=beside) for i in range(4)]
    records += [step(i, pid=real) for i in (1, 2)]
    control = StepControl(tmp_path, 3, ranks=1)
    arrivals = []
    for at, record in enumerate(records):
        control.answer(record)
        arrivals.append(Arrival(float(at), {**record, "t": float(at)}))
    report = StepFeed(lambda: arrivals, ranks=1, launched_at=0.0).finish()
    answered = {pid: _answers(tmp_path, pid) for pid in (forged, real, beside)}
    control.close()
    assert answered == {forged: b"", real: b"ccs", beside: b""}
    assert len(report.steps) == 3 and "rank 0 (pid 200) stepped beside pid 100" in report.problem
    assert control.stopped_at() is not None
