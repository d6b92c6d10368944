"""Helpers for driving the server over stdio: waiting on what the client recorded, applying edits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import LanguageClient


async def until(predicate: Callable[[], Any], timeout: float = 120.0, what: str = "condition") -> Any:
    """Poll what the client has recorded (waiting on a notification can miss one that came early)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def open_file(client: LanguageClient, path: Path, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=path.read_text())))
    return uri


async def diagnostics_for(client: LanguageClient, uri: str, timeout: float = 120.0) -> list[types.Diagnostic]:
    """The next diagnostics published for ``uri`` (pop the old ones before triggering new ones)."""
    await until(lambda: uri in client.diagnostics, timeout, f"diagnostics for {uri}")
    return list(client.diagnostics[uri])


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP edits (UTF-16 columns; non-overlapping) the way an editor does."""
    lines = text.splitlines(keepends=True)

    def offset(pos: types.Position) -> int:
        if pos.line >= len(lines):
            return len(text)
        line = lines[pos.line]
        units, chars = 0, 0
        while chars < len(line) and units < pos.character:
            units += 2 if ord(line[chars]) > 0xFFFF else 1
            chars += 1
        return sum(len(x) for x in lines[: pos.line]) + chars

    spans = sorted(((offset(e.range.start), offset(e.range.end), e.new_text) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def line_of(text: str, needle: str) -> int:
    """0-based line of the first line containing ``needle``."""
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)


async def raw_request(client: LanguageClient, method: str, params: Any) -> Any:
    """A request whose result stays plain JSON.

    lsprotocol's client-side converter turns every CodeAction that carries a ``command`` into a
    Command (and the command object into its repr); VS Code's client does not. Dropping the
    expected result type makes pygls keep the JSON as the server sent it.
    """
    msg_id = f"raw-{time.monotonic_ns()}"
    future = client.protocol.send_request(method, params, msg_id=msg_id)
    client.protocol._result_types.pop(msg_id, None)
    return await asyncio.wrap_future(future)
