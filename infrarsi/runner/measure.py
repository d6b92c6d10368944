"""What a running trial reports, read as it runs: the probe's JSON lines or, without the probe,
the script's own log lines (``iter N: loss X, time Yms``).

Under torchrun each rank writes ``<probe file>.rank<N>``; a step counts once every rank has
reported it, at the slowest rank's time (the job is as fast as its slowest rank) with rank 0's
loss and tokens.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

LOG_LINE = re.compile(
    r"iter\s+(?P<step>\d+)\s*:\s*loss\s+(?P<loss>[-+]?(?:nan|inf|[\d.]+(?:e[-+]?\d+)?))\s*,\s*"
    r"time\s+(?P<ms>[\d.]+(?:e[-+]?\d+)?)\s*ms",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Step:
    index: int
    dt: float
    """Seconds; for a torchrun group, the slowest rank's."""
    loss: float
    tokens: int | None
    """None when the run reports through log lines, which carry no token count."""
    phases: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class RunReport:
    steps: list[Step] = field(default_factory=list)
    source: str = ""
    """probe | log | "" (nothing reported)."""
    model_facts: dict[str, int] = field(default_factory=dict)
    exit_peak_bytes: int | None = None
    """Largest rank's peak from the probe's exit event (absent when the run was killed)."""
    exit_device: str = ""
    first_step_at: float | None = None
    """perf_counter() when the first step was first seen (within one poll of its end)."""


class _Tail:
    """New complete lines of a growing file."""

    def __init__(self, path: Path):
        self.path = path
        self._offset = 0
        self._partial = b""

    def lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        return [line.decode("utf-8", "replace") for line in complete]


class _Rank:
    def __init__(self, path: Path):
        self.tail = _Tail(path)
        self.steps: list[dict] = []
        self.model: dict = {}
        self.exit: dict = {}

    def read(self) -> None:
        for line in self.tail.lines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill
            event = record.get("event") if isinstance(record, dict) else None
            if event == "step":
                self.steps.append(record)
            elif event == "model":
                self.model = record
            elif event == "exit":
                self.exit = record


class StepFeed:
    """Call :meth:`poll` while the trial runs for the steps completed since the last call."""

    def __init__(self, probe_path: Path, log_path: Path, *, ranks: int | None = 1):
        """``ranks``: how many processes write probe files (None: unknown, whoever has)."""
        self._probe_path = Path(probe_path)
        self._expected_ranks = ranks
        self._finished = False
        self._log = _Tail(Path(log_path))
        self._ranks: dict[Path, _Rank] = {}
        self._log_steps: dict[int, Step] = {}
        self.report = RunReport()

    def poll(self) -> list[Step]:
        self._read_probe()
        self._read_log()
        source, steps = self._steps()
        new = steps[len(self.report.steps):]
        if new:
            self.report.source = source
            if self.report.first_step_at is None:
                self.report.first_step_at = time.perf_counter()
            self.report.steps.extend(new)
        return new

    def finish(self) -> RunReport:
        """Read what is left once the run has ended; ranks that never wrote no longer count."""
        self._finished = True
        self.poll()
        self.report.steps = self._steps()[1]
        ranks = self._ordered_ranks()
        if ranks:
            self.report.model_facts = {k: v for k, v in ranks[0].model.items() if k != "event"}
            exits = [r.exit for r in ranks if r.exit]
            if exits:
                self.report.exit_peak_bytes = max(int(e.get("peak_bytes", 0)) for e in exits)
                self.report.exit_device = str(exits[0].get("device", ""))
        return self.report

    def _steps(self) -> tuple[str, list[Step]]:
        """The source that reports (the probe, once its file exists) and all its steps so far."""
        if self.report.source == "probe" or (not self.report.source and self._ranks):
            return "probe", self._merged_probe_steps()
        return "log", [self._log_steps[i] for i in sorted(self._log_steps)]

    def _read_probe(self) -> None:
        directory = self._probe_path.parent
        paths = [self._probe_path, *directory.glob(self._probe_path.name + ".rank*")]
        for path in paths:
            if path not in self._ranks and path.exists():
                self._ranks[path] = _Rank(path)
        for rank in self._ranks.values():
            rank.read()

    def _ordered_ranks(self) -> list[_Rank]:
        def number(path: Path) -> int:
            suffix = path.name.rsplit(".rank", 1)
            return int(suffix[1]) if len(suffix) == 2 and suffix[1].isdigit() else -1

        return [self._ranks[p] for p in sorted(self._ranks, key=number)]

    def _merged_probe_steps(self) -> list[Step]:
        ranks = self._ordered_ranks()
        # A step counts once every rank has reported it: a rank that has not written its first
        # line yet must not let the fast ranks' steps through alone.
        waiting = self._expected_ranks is not None and len(ranks) < self._expected_ranks
        if not ranks or (waiting and not self._finished):
            return []
        steps = []
        for i in range(min(len(r.steps) for r in ranks)):
            records = [r.steps[i] for r in ranks]
            slowest = max(records, key=lambda rec: float(rec.get("dt", 0.0)))
            first = records[0]
            tokens = first.get("tokens")
            steps.append(
                Step(
                    index=int(first.get("step", i)),
                    dt=float(slowest.get("dt", 0.0)),
                    loss=_number(first.get("loss")),
                    tokens=int(tokens) if tokens is not None else None,
                    phases={k: float(v) for k, v in (slowest.get("phases") or {}).items()},
                )
            )
        return steps

    def _read_log(self) -> None:
        for line in self._log.lines():
            match = LOG_LINE.search(line)
            if match is None:
                continue
            index = int(match["step"])
            dt = float(match["ms"]) / 1000.0
            seen = self._log_steps.get(index)
            # Several ranks may print the same iteration: keep the slowest.
            if seen is None or dt > seen.dt:
                self._log_steps[index] = Step(index=index, dt=dt, loss=float(match["loss"]), tokens=None)


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def split_warmup(steps: list[Step], warmup_steps: int, total_steps: int) -> tuple[list[Step], list[Step]]:
    """(warm-up, measured). A run shorter than its warm-up keeps its last step as measured."""
    warmup = min(warmup_steps, max(total_steps - 1, 0))
    return [s for s in steps if s.index < warmup], [s for s in steps if s.index >= warmup]


def mean_phases(steps: list[Step]) -> dict[str, float]:
    """Mean seconds per step in each phase over ``steps``."""
    if not steps:
        return {}
    names = sorted({name for s in steps for name in s.phases})
    return {name: sum(s.phases.get(name, 0.0) for s in steps) / len(steps) for name in names}
