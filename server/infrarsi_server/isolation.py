"""Analysis jobs in their own processes, each with a time limit; a few at a time.

libcst's native parser can crash the process (SIGSEGV on thousands of nested parentheses) or
run for minutes (a 10,000-term expression); neither may take the server down or hold up other
documents. Each job runs in a fresh process forked from a forkserver that has the patch library
imported already (a fork costs milliseconds, an import of libcst and torch-free patches about a
second), so one process per job is affordable and a job that overruns is simply killed: no pool
to repair. At most ``SLOTS`` jobs run at once, and one document holds at most one slot, so a slow
document never blocks another.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SLOTS = 2
TIME_LIMIT_S = float(os.environ.get("INFRARSI_ANALYSIS_TIME_LIMIT_S", "20"))
"""Seconds one job may run; overridable for tests that wait on the limit."""

OK, CRASHED, TIMED_OUT, FAILED = "ok", "crashed", "timed out", "failed"


@dataclass(frozen=True, slots=True)
class JobResult:
    status: str
    value: Any = None
    detail: str = ""
    """What happened when it is not ``ok``: the signal, the limit, the exception."""

    @property
    def ok(self) -> bool:
        return self.status == OK


def _serve(conn, fn: Callable, args: tuple) -> None:
    try:
        conn.send((OK, fn(*args)))
    except BaseException as err:  # noqa: BLE001 - reported to the server as the job's result
        conn.send((FAILED, f"{type(err).__name__}: {err}"))
    finally:
        conn.close()


def _run(ctx, fn: Callable, args: tuple, limit_s: float) -> JobResult:
    parent, child = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_serve, args=(child, fn, args), daemon=True)
    process.start()
    child.close()
    try:
        if not parent.poll(limit_s):
            process.kill()
            return JobResult(TIMED_OUT, detail=f"stopped after {limit_s:.0f} s")
        try:
            status, value = parent.recv()
        except (EOFError, OSError):
            process.join(5)
            code = process.exitcode
            how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            return JobResult(CRASHED, detail=f"the analysis process died ({how})")
        return JobResult(OK, value) if status == OK else JobResult(FAILED, detail=value)
    finally:
        parent.close()
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()


class Isolated:
    """Runs module-level functions of ``preload`` in killable processes."""

    def __init__(self, preload: list[str], slots: int = SLOTS, limit_s: float = TIME_LIMIT_S) -> None:
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(preload)
        self._slots = asyncio.Semaphore(slots)
        self._owners: dict[str, asyncio.Lock] = {}
        self.limit_s = limit_s

    async def call(self, owner: str, fn: Callable, *args: Any) -> JobResult:
        """``fn(*args)`` in a fresh process; ``owner`` (a document) runs one job at a time."""
        lock = self._owners.setdefault(owner, asyncio.Lock())
        async with lock, self._slots:
            return await asyncio.to_thread(_run, self._ctx, fn, args, self.limit_s)
