"""Build the language server from its feature modules and serve it over stdio."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

from lsprotocol import types
from pygls.uris import to_fs_path

from infrarsi_server.features import code_actions, code_lens, commands, diagnostics, hover
from infrarsi_server.server import InfraRSIServer

FEATURES = (diagnostics, hover, code_actions, code_lens, commands)
"""Each module's ``setup(server)`` registers its handlers; the order is the order of registration."""


def build() -> InfraRSIServer:
    server = InfraRSIServer()

    @server.feature(types.INITIALIZED)
    def initialized(ls: InfraRSIServer, _params: types.InitializedParams) -> None:
        ls.loop = asyncio.get_running_loop()
        ls.repos.folders = [Path(to_fs_path(f.uri)).resolve() for f in ls.workspace.folders.values()]
        ls.log(f"InfraRSI server ready for {', '.join(map(str, ls.repos.folders)) or 'no folder'}")
        ls.warming = asyncio.ensure_future(ls.analyses.warm())

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def folders_changed(ls: InfraRSIServer, _params: types.DidChangeWorkspaceFoldersParams) -> None:
        ls.repos.folders = [Path(to_fs_path(f.uri)).resolve() for f in ls.workspace.folders.values()]

    for feature in FEATURES:
        feature.setup(server)
    return server


class _AnsweredElsewhere(logging.Filter):
    """pygls logs a traceback for params it cannot read; the protocol answers InvalidParams and logs one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Unable to deserialize message")


def main() -> None:
    # The protocol owns stdout: anything else writing there (a stray print in a stage, a C library,
    # a child process inheriting fd 1) would corrupt the stream. The protocol keeps a private copy
    # of the descriptor; fd 1 and sys.stdout then lead to stderr.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_AnsweredElsewhere())
    build().start_io(sys.stdin.buffer, protocol_out)


