"""Long commands in worker threads, and how they are cancelled.

The core's stages already know how to stop: on KeyboardInterrupt (Ctrl-C in the CLI) a running
trial kills its whole process tree in a ``finally`` and ``run`` records the interrupted trial in
the study and returns status ``interrupted``. Signals only reach the main thread, which here runs
the event loop, so a cancelled job gets the same KeyboardInterrupt raised inside its own thread
(``PyThreadState_SetAsyncExc``): the stage stops through the path the CLI already exercises.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Outcome:
    status: str
    """ok | cancelled | error."""
    value: Any = None
    error: BaseException | None = None


class Job:
    """One stage call running in a thread of its own."""

    def __init__(self, name: str, fn: Callable[[], Any]):
        self.name = name
        self._fn = fn
        self._lock = threading.Lock()
        self._finished = False
        self.cancel_requested = False
        self.outcome = Outcome("cancelled")
        self._thread = threading.Thread(target=self._target, name=f"infrarsi-{name}", daemon=True)

    def _target(self) -> None:
        try:
            try:
                if not self.cancel_requested:  # cancelled before the thread got going
                    self.outcome = Outcome("ok", self._fn())
            except KeyboardInterrupt:
                self.outcome = Outcome("cancelled")
            except Exception as err:  # a stage that raised: reported to the client, not fatal
                self.outcome = Outcome("error", error=err)
            finally:
                with self._lock:
                    self._finished = True
        except KeyboardInterrupt:
            # the interrupt was asked for just as the stage returned: it is cancelled all the same
            if self.outcome.status == "ok":
                self.outcome = Outcome("cancelled", self.outcome.value)

    async def result(self) -> Outcome:
        self._thread.start()
        # join in the loop's executor: the event loop keeps serving requests meanwhile
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
        if self.cancel_requested and self.outcome.status == "ok":
            self.outcome.status = "cancelled"  # run() swallows the interrupt and returns "interrupted"
        return self.outcome

    def cancel(self) -> None:
        with self._lock:
            first = not self.cancel_requested
            self.cancel_requested = True
            if first and not self._finished and self._thread.ident is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(self._thread.ident), ctypes.py_object(KeyboardInterrupt)
                )


class Jobs:
    """Running jobs by the request id and the progress token the client may cancel them with."""

    def __init__(self) -> None:
        self._by_request: dict[Any, Job] = {}
        self._by_token: dict[Any, Job] = {}

    def track(self, job: Job, request_id: Any, token: Any) -> None:
        if request_id is not None:
            self._by_request[request_id] = job
        if token is not None:
            self._by_token[token] = job

    def forget(self, job: Job) -> None:
        for table in (self._by_request, self._by_token):
            for key in [k for k, v in table.items() if v is job]:
                del table[key]

    def cancel_request(self, request_id: Any) -> bool:
        """True when the request is one of ours (it then answers RequestCancelled itself)."""
        job = self._by_request.get(request_id)
        if job is None:
            return False
        job.cancel()
        return True

    def cancel_token(self, token: Any) -> None:
        job = self._by_token.get(token)
        if job is not None:
            job.cancel()
