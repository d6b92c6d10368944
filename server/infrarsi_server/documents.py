"""An open document together with the repo it belongs to and the analysis of its current text."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from infrarsi_server.analysis import Analysis
from infrarsi_server.server import InfraRSIServer
from infrarsi_server.state import Snapshot


@dataclass(frozen=True, slots=True)
class DocumentView:
    uri: str
    path: Path
    document: TextDocument
    snapshot: Snapshot
    rel: str | None
    """Relative to the repo root; None for a file outside it."""
    text: str
    key: tuple

    async def analysis(self, server: InfraRSIServer) -> Analysis:
        return await server.analyses.get(self.key, self.rel, self.text, self.snapshot.contract,
                                         server.workspace.position_codec)

    async def fix(self, server: InfraRSIServer, patch: str) -> list[types.TextEdit] | None:
        """The quick fix's edits for ``patch`` on this text (computed when asked, then kept)."""
        return await server.analyses.fix(self.key, self.rel or "", self.text, patch, server.workspace.position_codec)


def view(server: InfraRSIServer, uri: str) -> DocumentView | None:
    """None for documents that are not files (untitled buffers, git diffs…)."""
    fs_path = to_fs_path(uri)
    if fs_path is None or not uri.startswith("file:"):
        return None
    path = Path(fs_path)
    document = server.workspace.get_text_document(uri)
    snapshot = server.repos.for_path(path)
    text = document.source
    return DocumentView(uri, path, document, snapshot, snapshot.rel(path), text,
                        server.analyses.key(path, text, snapshot.contract))
