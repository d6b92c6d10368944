"""When a trial's processes stop: decided in InfraRSI's process, one step at a time.

A job that knew how many steps its run will take could spend time only in the runs that stop
early, and the two-length measurement that decides a promotion (infrarsi/whole_process.py) would
read that as faster steps. So the number never enters the job: after each step record, the
launcher waits for one byte on its own control FIFO (``ctl-<pid>``, made by the launcher beside
the record channel before its first step record): ``c`` to go on, ``s`` to stop after this step.
The answer is written by the channel's reader thread the moment the record arrives.

Only the step records the step feed counts are answered, by the rule it counts by
(:mod:`infrarsi.launcher.streams`): a well-formed pid and rank, the stream's next step in order,
from one of the run's streams (the first to step, one per rank, no more than the command starts).
Every other record gets no answer at all, whatever FIFO the job made for it: the job's own code can
write records and make FIFOs, and one answer to a record the feed drops would tell it its length
before it stepped. A stream is answered on its own count: ``s`` after its ``steps``-th step.

The FIFO lies in the job's writable workspace, so it is opened without following links and
written only when it is a FIFO.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from infrarsi.launcher.streams import StepStreams

GO, STOP = b"c", b"s"


class StepControl:
    """Answers each process's step records: go on until it has made ``steps`` steps."""

    def __init__(self, directory: Path, steps: int, *, ranks: int | None):
        """``ranks``: how many processes the command starts that step (None: unknown), the
        number the trial's step feed is given."""
        self.directory = Path(directory)
        self.steps = steps
        self._lock = threading.Lock()
        self._streams = StepStreams(ranks)
        self._stepped: set[int] = set()
        self._fds: dict[int, int | None] = {}
        self._stopped: dict[int, float] = {}
        self.before_stop: Callable[[], None] | None = None
        """Called just before a process is told to stop (the interference monitor takes a sample
        there, so no step's window has to be read across the job's exit)."""

    def answer(self, record: dict) -> None:
        """Called for every record as it arrives (on the channel's reader thread)."""
        with self._lock:
            step = self._streams.judge(record).step
            if step is None:
                return
            pid = record["pid"]
            self._stepped.add(pid)
            fd = self._control(pid)
            stop = step + 1 >= self.steps
            if fd is None:
                return
            if stop and self.before_stop is not None:
                self.before_stop()
            try:
                os.write(fd, STOP if stop else GO)
            except OSError:
                return
            if stop:
                self._stopped.setdefault(pid, time.monotonic())

    def stopped_at(self) -> float | None:
        """time.monotonic() when the last process that stepped was told to stop; None when some
        process that stepped was never told (the run ended or was killed before its last step)."""
        with self._lock:
            if not self._stepped or self._stepped - set(self._stopped):
                return None
            return max(self._stopped.values())

    def _control(self, pid: int) -> int | None:
        if pid not in self._fds:
            try:
                # O_RDWR: never blocks for want of a reader, and the byte waits in the pipe for it.
                fd = os.open(self.directory / f"ctl-{pid}", os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW)
            except OSError:
                fd = None
            if fd is not None and not stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.close(fd)
                fd = None
            self._fds[pid] = fd
        return self._fds[pid]

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                if fd is not None:
                    os.close(fd)
            self._fds = {pid: None for pid in self._fds}
