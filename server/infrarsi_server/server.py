"""The language server object: pygls' server plus the InfraRSI state the features share."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcRequestCancelled
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from infrarsi_server.analysis import Analyses
from infrarsi_server.jobs import Jobs
from infrarsi_server.state import Repos

NAME = "infrarsi-server"
VERSION = "0.1.0"


@dataclass(frozen=True, slots=True)
class InvalidRequest:
    """A request whose params do not fit its method: answered with InvalidParams, not dropped."""

    jsonrpc: str
    id: Any
    method: str
    reason: str


class InfraRSIProtocol(LanguageServerProtocol):
    """pygls' protocol with what the Output panel and a careless client need.

    - ``$/cancelRequest`` for a running InfraRSI command goes to its job: pygls runs
      ``workspace/executeCommand`` through a generator whose outer future it cancels at once, and
      the stage in its thread would go on, trials and all. A job instead stops its stage first
      (killing the trial's process tree) and then answers RequestCancelled itself, which is
      logged as one line, not as pygls' traceback of an exception.
    - A cancel for a request already answered is normal (the client cancels what it no longer
      waits for): ignored, not warned about.
    - A request whose params do not deserialize gets an InvalidParams error response; pygls
      would log the traceback and never answer, leaving the client waiting.
    """

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        if self._server.jobs.cancel_request(msg_id):
            return
        future = self._request_futures.pop(msg_id, None)
        if future is not None:
            future.cancel()

    def _send_handler_result(self, future: Future, *, msg_id: Any) -> None:
        if not future.cancelled() and isinstance(future.exception(), JsonRpcRequestCancelled):
            self._request_futures.pop(msg_id, None)
            self._send_response(msg_id, error=future.exception().to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    def structure_message(self, data: dict[str, Any]):
        if "jsonrpc" in data and "method" in data and "id" in data and "error" not in data:
            try:
                return super().structure_message(data)
            except JsonRpcException as err:
                return InvalidRequest(data["jsonrpc"], data["id"], str(data["method"]), str(err.__cause__ or err))
        return super().structure_message(data)

    def handle_message(self, message) -> None:
        if isinstance(message, InvalidRequest):
            reason = message.reason.splitlines()[0] if message.reason else "invalid params"
            self._server.log(f"{message.method}: invalid params ({reason})", types.MessageType.Warning)
            self._send_response(message.id, error=JsonRpcInvalidParams(
                message=f"invalid params for {message.method}: {reason}").to_response_error())
            return
        super().handle_message(message)


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
