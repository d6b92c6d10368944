"""Core progress events as LSP work-done progress: one begin, a report per step, one end.

Stages report through ``infrarsi.events`` from the job's thread; every notification is handed to
the event loop, which alone writes to the client. Nested stages (optimize runs init, doctor and
run; a trial reports its steps) share the one progress bar: stage begins and trial reports become
reports. No percentage: the stages' own counts restart from stage to stage, so the message
carries them (``run: trial 3 (search): ok, 412 ms/step``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from lsprotocol import types

from infrarsi.events import Event, clock
from infrarsi_server.server import InfraRSIServer


class WorkDone:
    def __init__(self, server: InfraRSIServer, token: Any, title: str):
        self.server = server
        self.token = token
        self.title = title
        self.run_started: float | None = None

    @classmethod
    async def start(cls, server: InfraRSIServer, token: Any, title: str) -> WorkDone:
        """Use the client's token, or create one when the client lets the server (else: silent)."""
        if token is None and server.client_supports("window.work_done_progress"):
            token = f"infrarsi-{uuid.uuid4()}"
            await server.work_done_progress.create_async(token)
        progress = cls(server, token, title)
        progress._send(types.WorkDoneProgressBegin(title=title, cancellable=True))
        return progress

    def _send(self, value: types.WorkDoneProgressBegin | types.WorkDoneProgressReport | types.WorkDoneProgressEnd) -> None:
        if self.token is None:
            return
        progress = self.server.work_done_progress
        method = {types.WorkDoneProgressBegin: progress.begin, types.WorkDoneProgressReport: progress.report,
                  types.WorkDoneProgressEnd: progress.end}[type(value)]
        loop = self.server.loop
        if loop is None:
            method(self.token, value)
        else:
            loop.call_soon_threadsafe(method, self.token, value)

    def event(self, event: Event) -> None:
        """The EventSink handed to the stage (called in the job's thread).

        The Output panel gets what a person wants to read back later: each finished trial and
        each stage's end; the progress notification gets every step.
        """
        if event.kind == "log":
            self.server.log(f"[{event.stage}] {event.message}")
            return
        if event.stage == "run" and event.kind == "begin":
            self.run_started = time.monotonic()
        trial_done = event.stage == "run" and event.kind == "report" and "status" in event.data
        if trial_done or (event.kind == "end" and event.stage != "trial" and event.message):
            self.server.log(f"[{event.stage}] {event.message}")
        message = f"{event.stage}: {event.message}" if event.message else event.stage
        if trial_done and event.total:
            elapsed = clock(time.monotonic() - self.run_started) if self.run_started is not None else ""
            step_s = event.data.get("step_s")
            result = event.data["status"] + (f", {step_s * 1000:.0f} ms a step" if step_s else "")
            where = "re-verifying" if event.data.get("kind") == "verification" else f"trial {event.done} of {event.total}"
            message = f"{where}{', ' + elapsed if elapsed else ''}: {result}"
        self._send(types.WorkDoneProgressReport(message=message, cancellable=True))

    def end(self, message: str) -> None:
        """Called on the event loop once the job is over; the token is then free for reuse."""
        self._send(types.WorkDoneProgressEnd(message=message))
        self.server.work_done_progress.tokens.pop(self.token, None)
