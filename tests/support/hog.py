"""A CPU hog: real busy-loop processes pinned to each of the given cores (another user's work on
the job's machine), started and stopped by a test."""

from __future__ import annotations

import os
import subprocess
import sys


class CpuHogs:
    def __init__(self, cores: frozenset[int] | set[int], per_core: int = 1):
        self.cores = sorted(cores) * per_core
        self.procs: list[subprocess.Popen] = []

    @property
    def running(self) -> bool:
        return bool(self.procs)

    def start(self) -> None:
        for core in self.cores:
            proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            os.sched_setaffinity(proc.pid, {core})
            self.procs.append(proc)

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self.procs = []

    def __enter__(self) -> CpuHogs:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
