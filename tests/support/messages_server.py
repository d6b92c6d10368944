"""A loopback server that answers POST /v1/messages in the Anthropic Messages API format.

Tests point the real ``anthropic`` client at it (``base_url=server.url``) and script its
replies in order; every request is recorded. Usage::

    with MessagesServer() as server:
        server.script(tool_use_reply("record_priors", {"priors": [...]}))
        client = anthropic.Anthropic(api_key="test", base_url=server.url, max_retries=0)
        ...
        assert len(server.requests) == 1

When the script runs out the server answers 500 with an error naming it, so a test that sends
more requests than it scripted fails loudly instead of hanging.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    """Wait this long before answering (a timeout test sets it above the client's timeout)."""


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    """The parsed JSON body (None when it was not JSON)."""


def _message(content: list[dict[str, Any]], stop_reason: str, model: str) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 50},
    }


def _json(status: int, payload: Any, headers: dict[str, str] | None = None, delay_s: float = 0.0) -> Reply:
    return Reply(status, json.dumps(payload).encode(), {"content-type": "application/json", **(headers or {})}, delay_s)


def tool_use_reply(name: str, tool_input: Any, *, model: str = "claude-test", delay_s: float = 0.0) -> Reply:
    """The model called tool ``name`` with ``tool_input`` (any JSON value, to test validation)."""
    block = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": name, "input": tool_input}
    return _json(200, _message([block], "tool_use", model), delay_s=delay_s)


def text_reply(text: str, *, model: str = "claude-test") -> Reply:
    """The model answered in prose instead of calling the tool."""
    return _json(200, _message([{"type": "text", "text": text}], "end_turn", model))


def malformed_reply() -> Reply:
    """A 200 whose body is not JSON at all (a broken proxy, a truncated response)."""
    return Reply(200, b'{"id": "msg_1", "type": "message", "content": [', {"content-type": "application/json"})


def slow_reply(delay_s: float, then: Reply | None = None) -> Reply:
    """Answer only after ``delay_s`` seconds; set it above the client's timeout to force one."""
    base = then or text_reply("late")
    return Reply(base.status, base.body, base.headers, delay_s)


def rate_limited(retry_after_s: float = 0.01) -> Reply:
    """429 in the API's error format, with ``retry-after`` (the client waits that long before retrying)."""
    payload = {"type": "error",
               "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}}
    return _json(429, payload, {"retry-after": f"{retry_after_s:g}", "retry-after-ms": f"{retry_after_s * 1000:g}"})


def error_reply(status: int, kind: str, message: str) -> Reply:
    return _json(status, {"type": "error", "error": {"type": kind, "message": message}})


class MessagesServer:
    """Threaded HTTP server on 127.0.0.1 with a free port; a context manager."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._replies: list[Reply] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        # A short poll interval: shutdown() waits up to one interval, and tests start many servers.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="messages-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def script(self, *replies: Reply) -> None:
        """Append replies; each request consumes the next one."""
        with self._lock:
            self._replies.extend(replies)

    def __enter__(self) -> MessagesServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()  # cut short any reply still sleeping
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _next(self, request: RecordedRequest) -> Reply:
        """Record ``request`` and pick its reply: refused when malformed, else the next scripted one."""
        with self._lock:
            self.requests.append(request)
            if request.path.split("?")[0] != "/v1/messages":
                return error_reply(404, "not_found_error", f"no route {request.path}")
            # The client sends Authorization: Bearer … or x-api-key depending on how it was built.
            if not (request.headers.get("x-api-key") or request.headers.get("authorization")):
                return error_reply(401, "authentication_error", "no x-api-key or Authorization header")
            if self._replies:
                return self._replies.pop(0)
        return error_reply(500, "api_error", "messages server: no scripted reply left")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                headers = {k.lower(): v for k, v in self.headers.items()}
                reply = server._next(RecordedRequest("POST", self.path, headers, body))
                if reply.delay_s and server._closing.wait(reply.delay_s):
                    return
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout) before the reply was ready

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
                """Silence the per-request stderr line."""

        return Handler
