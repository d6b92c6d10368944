import json
import math
import os
import time

from infrarsi.launcher.channel import Arrival, RecordChannel
from infrarsi.runner.measure import StepFeed, mean_phases, split_warmup


class Arrivals:
    """Records as the channel hands them over: arrival time (InfraRSI's clock) and the record."""

    def __init__(self):
        self.pending: list[Arrival] = []

    def add(self, at, kind, pid=100, rank=0, t=None, **fields):
        self.pending.append(Arrival(at, {"kind": kind, "pid": pid, "rank": rank, "t": at if t is None else t,
                                         **fields}))

    def take(self):
        new, self.pending = self.pending, []
        return new


def test_steps_are_timed_by_arrival_from_the_start_record():
    arrivals = Arrivals()
    feed = StepFeed(arrivals.take, launched_at=10.0)
    assert feed.poll() == []
    arrivals.add(12.0, "start")
    arrivals.add(12.5, "step", step=0, loss=2.0, tokens=32, samples=4)
    arrivals.add(12.5, "model", params=10, layers=1)
    arrivals.add(12.7, "step", step=1, loss=1.5, tokens=32, samples=4, flops=1000)
    assert [(s.index, round(s.dt, 6)) for s in feed.poll()] == [(0, 0.5), (1, 0.2)]
    arrivals.add(12.71, "probe", step=1, loss=1.5, tokens=32, phases={"forward": 0.1})
    arrivals.add(12.8, "exit", peak_bytes=1234, device="cpu", params=3)
    report = feed.finish()
    assert report.source == "launcher" and report.model_facts == {"params": 10, "layers": 1}
    assert report.startup_s == 2.0 and report.flops_per_step == 1000 and report.params_pids == [100]
    assert report.exit_peak_bytes == 1234 and report.steps[1].phases == {"forward": 0.1}
    assert report.problem == ""


def test_ranks_merge_at_the_slowest_rank_summing_tokens_and_averaging_the_loss():
    arrivals = Arrivals()
    feed = StepFeed(arrivals.take, ranks=2, launched_at=0.0)
    arrivals.add(1.0, "start", pid=1, rank=0)
    arrivals.add(1.5, "step", pid=1, rank=0, step=0, loss=2.0, tokens=16)
    arrivals.add(1.9, "step", pid=1, rank=0, step=1, loss=1.0, tokens=16)
    assert feed.poll() == []  # rank 1 has not reported yet
    arrivals.add(1.1, "start", pid=2, rank=1)
    arrivals.add(2.0, "step", pid=2, rank=1, step=0, loss=3.0, tokens=16)
    merged = feed.poll()
    # Each rank's step 0 runs from its own start: 0.5 s for rank 0, 0.9 s for rank 1, the slowest.
    assert [(s.index, round(s.dt, 6), s.loss, s.tokens) for s in merged] == [(0, 0.9, 2.5, 32)]
    arrivals.add(2.2, "step", pid=2, rank=1, step=1, loss=1.0, tokens=16)
    arrivals.add(2.3, "exit", pid=2, rank=1, peak_bytes=900, device="cpu")
    arrivals.add(2.3, "exit", pid=1, rank=0, peak_bytes=700, device="cpu")
    report = feed.finish()
    # Step 1: rank 0 took 0.4 s (1.5 to 1.9), rank 1 0.2 s (2.0 to 2.2).
    assert [round(s.dt, 6) for s in report.steps] == [0.9, 0.4] and report.exit_peak_bytes == 900


def test_a_job_stamping_records_with_another_clock_is_named():
    arrivals = Arrivals()
    feed = StepFeed(arrivals.take, launched_at=0.0)
    arrivals.add(1.0, "start")
    for i in range(6):
        arrivals.add(1.0 + 0.1 * (i + 1), "step", step=i, loss=1.0, t=1.0 + 0.001 * (i + 1))
    report = feed.finish()
    assert "the job's clock disagrees with InfraRSI's" in report.problem
    assert "6 steps took 0.006 s" in report.problem
    future = Arrivals()
    feed = StepFeed(future.take, launched_at=0.0)
    future.add(1.0, "step", step=0, loss=1.0, t=3.0)
    feed.poll()
    assert "stamped 2 s after it arrived" in feed.report.problem


def test_out_of_order_or_repeated_steps_are_not_the_launchers():
    arrivals = Arrivals()
    feed = StepFeed(arrivals.take, launched_at=0.0)
    arrivals.add(1.0, "step", step=0, loss=1.0)
    arrivals.add(1.1, "step", step=0, loss=1.0)
    feed.poll()
    assert "reported step 0 after 1 steps" in feed.report.problem


def test_the_channel_stamps_each_line_when_it_arrives_and_drains_on_close(tmp_path):
    channel = RecordChannel(tmp_path / "records.fifo")
    fd = os.open(channel.path, os.O_WRONLY)
    os.write(fd, b'{"kind": "step", "step": 0}\n{"kind": "st')
    time.sleep(0.2)
    before = time.monotonic()
    os.write(fd, b'ep", "step": 1}\nnot json\n')
    os.close(fd)
    channel.close()
    first, second = channel.all()
    assert (first.record["step"], second.record["step"]) == (0, 1)
    assert first.at < before <= second.at
    assert not channel.path.exists()
    channel.save(tmp_path / "records.jsonl")
    saved = [json.loads(line) for line in open(tmp_path / "records.jsonl")]
    assert [r["arrived"] for r in saved] == [first.at, second.at]


def test_warmup_split_keeps_a_measured_step_in_a_short_run():
    arrivals = Arrivals()
    for i in range(5):
        arrivals.add(1.0 + i, "step", step=i, loss=1.0)
    steps = StepFeed(arrivals.take, launched_at=0.0).finish().steps
    warm, measured = split_warmup(steps, warmup_steps=2, total_steps=5)
    assert [s.index for s in warm] == [0, 1] and [s.index for s in measured] == [2, 3, 4]
    warm, measured = split_warmup(steps[:2], warmup_steps=5, total_steps=2)
    assert [s.index for s in measured] == [1]
    assert mean_phases(measured) == {} and math.isclose(steps[1].dt, 1.0)
