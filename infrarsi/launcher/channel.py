"""The record channel: a FIFO the job's processes write JSON lines into, read by a thread of
InfraRSI's that stamps each line with ``time.monotonic()`` the moment it arrives.

The parent holds the FIFO open for reading *and* writing, so the job's ``open(O_WRONLY)`` never
blocks and the reader never sees end-of-file between writers; :meth:`RecordChannel.close` ends the
thread by writing a line of its own. ``answer`` sees each record on that thread as it is read: the
job's processes wait for InfraRSI's word after each step (:mod:`infrarsi.launcher.control`).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_CLOSE = b'{"kind": "__close__"}\n'


@dataclass(frozen=True, slots=True)
class Arrival:
    at: float
    """time.monotonic() in InfraRSI's process when the line was read."""
    record: dict


class RecordChannel:
    def __init__(self, path: Path, answer: Callable[[dict], None] = lambda record: None):
        self.path = Path(path)
        self._answer = answer
        os.mkfifo(self.path, 0o600)
        self._fd: int | None = os.open(self.path, os.O_RDWR)
        self._lock = threading.Lock()
        self._arrivals: list[Arrival] = []
        self._taken = 0
        self._thread = threading.Thread(target=self._read, name=f"infrarsi-records-{self.path.name}", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        partial = b""
        while True:
            fd = self._fd
            if fd is None:  # closed while this thread was still reading
                return
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                return
            at = time.monotonic()
            *lines, partial = (partial + data).split(b"\n")
            parsed: list[Arrival] = []
            for line in lines:
                if line + b"\n" == _CLOSE:
                    self._add(parsed)
                    return
                try:
                    record = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                if isinstance(record, dict):
                    parsed.append(Arrival(at, record))
                    self._answer(record)
            self._add(parsed)

    def _add(self, arrivals: list[Arrival]) -> None:
        with self._lock:
            self._arrivals.extend(arrivals)

    def take(self) -> list[Arrival]:
        """Records arrived since the last call."""
        with self._lock:
            new = self._arrivals[self._taken:]
            self._taken = len(self._arrivals)
        return new

    def all(self) -> list[Arrival]:
        with self._lock:
            return list(self._arrivals)

    def close(self) -> None:
        """Once the job is gone: read what is left, stop the thread, remove the FIFO. Everything the
        job wrote is ahead of this line in the FIFO, so it has all been read when the thread ends."""
        if self._fd is None:
            return
        if self._thread.is_alive():
            os.write(self._fd, _CLOSE)
            self._thread.join(timeout=10)
        os.close(self._fd)
        self._fd = None
        self.path.unlink(missing_ok=True)

    def save(self, path: Path) -> None:
        """Every record as received, with its arrival time, one JSON line each."""
        with open(path, "w") as f:
            for a in self.all():
                f.write(json.dumps({**a.record, "arrived": a.at}) + "\n")
