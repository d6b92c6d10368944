"""The language server object: pygls' server plus the InfraRSI state the features share."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from infrarsi_server.analysis import Analyses
from infrarsi_server.jobs import Jobs
from infrarsi_server.state import Repos

NAME = "infrarsi-server"
VERSION = "0.1.0"


class InfraRSIProtocol(LanguageServerProtocol):
    """Routes ``$/cancelRequest`` for a running InfraRSI command to its job.

    pygls runs ``workspace/executeCommand`` through a generator whose outer future it cancels at
    once; the stage in its thread would go on, trials and all. A job instead stops its stage
    first (killing the trial's process tree) and then answers RequestCancelled itself.
    """

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        if not self._server.jobs.cancel_request(msg_id):
            super()._handle_cancel_notification(msg_id)


class InfraRSIServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(NAME, VERSION, protocol_cls=InfraRSIProtocol)
        self.repos = Repos()
        self.analyses = Analyses(log=lambda message: self.log(message, types.MessageType.Warning))
        self.jobs = Jobs()
        self.warming: asyncio.Future | None = None
        """Starting the analysis processes (kept so the task is not collected while it runs)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """The event loop, once serving: threads hand it their notifications."""

    def log(self, message: str, level: types.MessageType = types.MessageType.Info) -> None:
        """``window/logMessage`` from any thread (nothing goes to stdout but the protocol)."""
        params = types.LogMessageParams(type=level, message=message)
        if self.loop is None or _on_loop(self.loop):
            self.window_log_message(params)
        else:
            self.loop.call_soon_threadsafe(self.window_log_message, params)

    def client_supports(self, path: str) -> bool:
        """Whether a dotted client capability (``window.work_done_progress``) is set."""
        value: Any = self.client_capabilities
        for part in path.split("."):
            value = getattr(value, part, None)
            if value is None:
                return False
        return bool(value)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
