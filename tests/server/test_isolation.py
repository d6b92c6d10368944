"""The analysis processes themselves: a real crash, a real overrun, and the slots they leave free."""

from __future__ import annotations

import asyncio
import ctypes
import time

from infrarsi_server.isolation import CRASHED, OK, TIMED_OUT, Isolated


async def test_a_segfault_is_a_result_and_the_next_job_runs():
    isolated = Isolated(["infrarsi_server.worker"], limit_s=20)
    crashed = await isolated.call("a.py", ctypes.string_at, 0)  # reads address 0: SIGSEGV
    assert crashed.status == CRASHED and "signal 11" in crashed.detail
    assert (await isolated.call("a.py", sum, [1, 2])).value == 3


async def test_an_overrun_is_killed_at_the_limit_while_another_document_is_served():
    isolated = Isolated(["infrarsi_server.worker"], limit_s=2)
    await isolated.call("warm-up", sum, [])
    started = time.monotonic()
    slow = asyncio.ensure_future(isolated.call("slow.py", time.sleep, 30))
    await asyncio.sleep(0.2)
    other = await isolated.call("other.py", sum, [1, 2])
    assert other.status == OK and time.monotonic() - started < 2, "the other document waited for the slow one"
    result = await slow
    assert result.status == TIMED_OUT and result.detail == "stopped after 2 s"
    assert time.monotonic() - started < 10
