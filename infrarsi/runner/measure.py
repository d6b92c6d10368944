"""What a running trial reports: the launcher's records, timed by InfraRSI's own clock.

Every record arrives over the record channel (:mod:`infrarsi.launcher.channel`) stamped with
``time.monotonic()`` in this process at arrival. A step's time is the arrival of its record minus
the arrival of the previous one (for step 0: of the job's ``start`` record, its first forward or
backward). The job's own clock, prints and log lines are never a source of step time; the job-side
stamps in the records only serve to check that the records are what they claim (:data:`CLOCK_TOLERANCE`).

Each process that steps is a stream (torchrun: one per rank). A step counts once every expected
stream has reported it; its time is the slowest stream's (each stream's from its own previous
record), so a group runs at its slowest rank's pace. Tokens and samples are summed over the streams (every rank's share of the batch), the loss
is their mean, FLOPs are summed, peak memory is the largest.

Which step records count is :mod:`infrarsi.launcher.streams`' rule, the one the step control
answers by: a step record from no stream of the run, or out of order, is never a step, and one that
cannot be the launcher's fails the trial.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infrarsi.launcher.channel import Arrival
from infrarsi.launcher.streams import StepStreams, stream_of

FUTURE_S = 0.05
"""A record stamped this much later than it arrived was not written by the launcher's clock."""
CLOCK_TOLERANCE = 0.10
CLOCK_FLOOR_S = 0.25
"""The job-side and InfraRSI-side durations of the run's steps may differ by this fraction, or
this many seconds when more: the difference is only how late the last record was read."""


@dataclass(frozen=True, slots=True)
class Step:
    index: int
    dt: float
    """Seconds by InfraRSI's clock; for a group, the slowest rank's."""
    loss: float
    tokens: int | None
    """All ranks' tokens; None when the counted module's inputs were not integers."""
    samples: int | None = None
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds per probe phase (the slowest rank's), when the script uses the probe."""
    job_dt: float | None = None
    """The same interval by the job-side stamps (checked against ``dt``, never used as a time)."""
    peak_bytes: int | None = None
    """Largest rank's CUDA max allocated during this step; None on CPU."""
    ended_at: float | None = None
    """time.monotonic() when the slowest rank's record arrived: the step's window is ``[ended_at - dt, ended_at]``."""


@dataclass(slots=True)
class RunReport:
    steps: list[Step] = field(default_factory=list)
    source: str = ""
    """launcher | "" (nothing reported)."""
    model_facts: dict[str, int] = field(default_factory=dict)
    exit_peak_bytes: int | None = None
    """Largest rank's peak from the launcher's exit record (absent when the run was killed)."""
    exit_rank_peaks: dict[int, int] = field(default_factory=dict)
    """Each rank's peak from its exit record: its own high-water mark, which a watchdog sample can miss."""
    exit_device: str = ""
    first_step_at: float | None = None
    """time.monotonic() when step 0 arrived."""
    startup_s: float | None = None
    """Launch to the start of step 0 (its first forward or backward), by InfraRSI's clock."""
    flops_per_step: int | None = None
    """All ranks' FLOPs of one warm-up step, counted by FlopCounterMode."""
    steps_per_epoch: int | None = None
    """Optimizer steps in one pass over the training loader (its length over the batches a step
    draws), from rank 0's records; None when the job draws no batches from a sized DataLoader."""
    params_pids: list[int] = field(default_factory=list)
    """The pids (as the job saw them) of the processes whose parameters are in ``params-<pid>.pt``
    beside the channel: rank 0's when it wrote its exit record, then every other rank that wrote
    shards of its own (docs/launcher.md); empty when rank 0 wrote no exit record."""
    problem: str = ""
    """Why the records cannot be trusted (out of order, stamped by another clock); empty when fine."""


class _Stream:
    """The records of one process of the job."""

    def __init__(self, rank: int, pid: int):
        self.rank, self.pid = rank, pid
        self.start: Arrival | None = None
        self.steps: list[Arrival] = []
        self.probe: dict[int, dict] = {}
        self.exit: dict = {}


class StepFeed:
    """Call :meth:`poll` while the trial runs for the steps completed since the last call."""

    def __init__(self, source: Callable[[], list[Arrival]], *, ranks: int | None = 1, launched_at: float):
        """``source``: new arrivals (``RecordChannel.take``); ``ranks``: how many processes step
        (None: unknown, whoever does); ``launched_at``: time.monotonic() at launch."""
        self._source = source
        self._expected = ranks
        self._rule = StepStreams(ranks)
        self._launched_at = launched_at
        self._finished = False
        self._streams: dict[int, _Stream] = {}
        self._model: dict = {}
        self.report = RunReport()

    def poll(self) -> list[Step]:
        for arrival in self._source():
            self._take(arrival)
        steps = self._merged()
        new = steps[len(self.report.steps):]
        if new:
            self.report.source = "launcher"
            if self.report.first_step_at is None:
                self.report.first_step_at = self._completion(0)
            self.report.steps.extend(new)
        return new

    def finish(self) -> RunReport:
        """Read what is left once the run has ended; streams that never stepped no longer count."""
        self._finished = True
        self.poll()
        report = self.report
        report.steps = self._merged()
        report.model_facts = {k: int(v) for k, v in self._model.items()
                              if k not in ("kind", "rank", "pid", "t") and isinstance(v, (int, float))}
        streams = self._stepping()
        if streams:
            report.steps_per_epoch = steps_per_epoch([a.record for a in streams[0].steps])
        exited = [s for s in streams if s.exit]
        for stream in exited:
            peak = int(stream.exit.get("peak_bytes") or 0)
            report.exit_rank_peaks[stream.rank] = max(report.exit_rank_peaks.get(stream.rank, 0), peak)
        if exited:
            report.exit_peak_bytes = max(report.exit_rank_peaks.values())
            report.exit_device = str(exited[0].exit.get("device", ""))
            if streams[0].exit:
                report.params_pids = [streams[0].pid, *(s.pid for s in streams[1:] if s.exit.get("params"))]
        flops = [f for f in (self._flops(s) for s in streams) if f is not None]
        if flops and len(flops) == len(streams):
            report.flops_per_step = sum(flops)
        if report.steps:
            starts = [s.start.at for s in streams if s.start is not None]
            start = max(starts) if len(starts) == len(streams) else None
            report.startup_s = max(0.0, start - self._launched_at) if start is not None else None
        if not report.problem:
            report.problem = _clock_problem(report.steps)
        return report

    # --- records --------------------------------------------------------------------------------

    def _take(self, arrival: Arrival) -> None:
        record = arrival.record
        kind = record.get("kind")
        if kind == "model":
            self._model = self._model or record
            return
        identity = stream_of(record)
        if identity is None:
            return
        pid, rank = identity
        stream = self._streams.setdefault(pid, _Stream(rank, pid))
        if kind == "start":
            stream.start = stream.start or arrival
        elif kind == "step":
            self._check_step(stream, arrival)
        elif kind == "probe":
            stream.probe[int(record.get("step", len(stream.probe)))] = record
        elif kind == "exit":
            stream.exit = record

    def _check_step(self, stream: _Stream, arrival: Arrival) -> None:
        record = arrival.record
        verdict = self._rule.judge(record)
        if verdict.problem:
            self._problem(verdict.problem)
        if verdict.step is None:
            return
        where = f"rank {stream.rank} (pid {stream.pid})"
        stamped = record.get("t")
        if isinstance(stamped, (int, float)) and stamped > arrival.at + FUTURE_S:
            self._problem(f"the job's clock disagrees with InfraRSI's: {where}'s step {record['step']} is "
                          f"stamped {stamped - arrival.at:.3g} s after it arrived")
        stream.steps.append(arrival)

    def _problem(self, text: str) -> None:
        self.report.problem = self.report.problem or text

    # --- merging --------------------------------------------------------------------------------

    def _stepping(self) -> list[_Stream]:
        return sorted((s for s in self._streams.values() if s.steps), key=lambda s: (s.rank, s.pid))

    def _completion(self, i: int) -> float:
        return max(s.steps[i].at for s in self._stepping())

    def _merged(self) -> list[Step]:
        streams = self._stepping()
        waiting = self._expected is not None and len(streams) < self._expected
        if not streams or (waiting and not self._finished):
            return []
        # Where each stream's step 0 starts: its start record (else the launch), by both clocks.
        previous = [s.start.at if s.start is not None else self._launched_at for s in streams]
        previous_job = [_stamp(s.start) if s.start is not None else None for s in streams]
        steps = []
        for i in range(min(len(s.steps) for s in streams)):
            arrivals = [s.steps[i] for s in streams]
            records = [a.record for a in arrivals]
            spans = [a.at - before for a, before in zip(arrivals, previous, strict=True)]
            slowest = max(range(len(streams)), key=lambda k: spans[k])
            stamps = [_stamp(a) for a in arrivals]
            job_spans = [t - before for t, before in zip(stamps, previous_job, strict=True)
                         if t is not None and before is not None]
            probes = [s.probe.get(i, {}) for s in streams]
            steps.append(Step(
                index=i,
                dt=spans[slowest],
                loss=_mean([r.get("loss") for r in records]) if any(r.get("loss") is not None for r in records)
                else _number(probes[0].get("loss")),
                tokens=_total([r.get("tokens") for r in records]) or _total([p.get("tokens") for p in probes[:1]]),
                samples=_total([r.get("samples") for r in records]),
                phases={k: float(v) for k, v in (probes[slowest].get("phases") or probes[0].get("phases") or {}).items()},
                job_dt=max(job_spans) if len(job_spans) == len(streams) else None,
                peak_bytes=max((int(r["peak_bytes"]) for r in records if r.get("peak_bytes") is not None), default=None),
                ended_at=arrivals[slowest].at,
            ))
            previous, previous_job = [a.at for a in arrivals], stamps
        return steps

    def _flops(self, stream: _Stream) -> int | None:
        for arrival in stream.steps:
            if arrival.record.get("flops") is not None:
                return int(arrival.record["flops"])
        return None


def _clock_problem(steps: list[Step]) -> str:
    """Whether the job-side stamps tell another story than InfraRSI's clock over the whole run."""
    timed = [(s.dt, s.job_dt) for s in steps if s.job_dt is not None]
    if not timed:
        return ""
    ours, theirs = sum(dt for dt, _ in timed), sum(job_dt for _, job_dt in timed)
    if abs(ours - theirs) > max(CLOCK_TOLERANCE * ours, CLOCK_FLOOR_S):
        return (f"the job's clock disagrees with InfraRSI's: its records say {len(timed)} steps took "
                f"{theirs:.3f} s, InfraRSI saw them arrive over {ours:.3f} s")
    return ""


def _stamp(arrival: Arrival) -> float | None:
    """The job-side stamp of a record, when it has a usable one."""
    t = arrival.record.get("t")
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _mean(values: list) -> float:
    numbers = [_number(v) for v in values]
    return sum(numbers) / len(numbers)


def _total(values: list) -> int | None:
    present = [int(v) for v in values if v is not None]
    return sum(present) if present else None


def split_warmup(steps: list[Step], warmup_steps: int, total_steps: int) -> tuple[list[Step], list[Step]]:
    """(warm-up, measured). A run shorter than its warm-up keeps its last step as measured."""
    warmup = min(warmup_steps, max(total_steps - 1, 0))
    return [s for s in steps if s.index < warmup], [s for s in steps if s.index >= warmup]


def mean_phases(steps: list[Step]) -> dict[str, float]:
    """Mean seconds per step in each phase over the ``steps`` that report phases (a step killed
    before its probe.step() reports none)."""
    phased = [s for s in steps if s.phases]
    if not phased:
        return {}
    names = sorted({name for s in phased for name in s.phases})
    return {name: sum(s.phases.get(name, 0.0) for s in phased) / len(phased) for name in names}


def steps_per_epoch(records: list[dict]) -> int | None:
    """One pass of the loader most steps drew from, in steps: its length over the median batches a
    step drew (an accumulating step draws several)."""
    drawn = [r["batches"] for r in records if isinstance(r.get("batches"), int) and r["batches"] > 0]
    lengths = [r["epoch_batches"] for r in records if isinstance(r.get("epoch_batches"), int) and r["epoch_batches"] > 0]
    if not drawn or not lengths:
        return None
    length = max(set(lengths), key=lengths.count)
    return math.ceil(length / statistics.median(drawn))
