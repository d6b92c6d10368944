"""Diagnostics on open and save, over stdio."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.server.lsp import diagnostics_for, line_of, open_file


async def test_patch_site_is_information_not_yet_verified(client: LanguageClient, repo: Path):
    model = repo / "model.py"
    uri = open_file(client, model)
    found = await diagnostics_for(client, uri)
    sdpa = [d for d in found if d.code == "sdpa_attention"]
    assert len(sdpa) == 1, found
    diag = sdpa[0]
    assert diag.severity == types.DiagnosticSeverity.Information
    assert "not yet verified" in diag.message
    text = model.read_text()
    # the site spans the hand-written attention: from the scores to the weighted sum
    assert diag.range.start.line == line_of(text, "att = (q @ k.transpose(-2, -1))")
    assert diag.range.end.line == line_of(text, "y = att @ v")
    assert not [d for d in found if d.severity == types.DiagnosticSeverity.Warning]


async def test_edited_locked_file_gets_a_warning_on_save(client: LanguageClient, repo: Path):
    data = repo / "data.py"
    uri = open_file(client, data)
    assert await diagnostics_for(client, uri) == [], "an untouched locked file is fine"

    edited = data.read_text() + "\n# tweak the corpus\n"
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited)]))
    data.write_text(edited)
    client.diagnostics.pop(uri)
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    found = await diagnostics_for(client, uri)
    assert [d.code for d in found] == ["locked-file-edited"]
    assert found[0].severity == types.DiagnosticSeverity.Warning
    assert "data.py is locked" in found[0].message


async def test_file_outside_scope_gets_no_patch_sites(client: LanguageClient, repo: Path):
    # the same hand-written attention in a locked file: patches may not touch it, so no site
    copy = repo / "data.py"
    copy.write_text((repo / "model.py").read_text())
    uri = open_file(client, copy)
    found = await diagnostics_for(client, uri)
    assert [d.code for d in found] == ["locked-file-edited"]
