"""Hover on a knob's definition."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.server.lsp import line_of, open_file


async def test_hover_on_a_knob_shows_role_domain_and_prior(client: LanguageClient, repo: Path):
    train = repo / "train.py"
    uri = open_file(client, train)
    line = line_of(train.read_text(), '"--micro_batch_size"')
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=25)))
    assert hover is not None
    text = hover.contents.value
    assert "`micro_batch_size`" in text
    assert "role: micro_batch" in text
    assert "domain: `1`, `2`, `4`, `8`" in text
    assert "prior: known once doctor has measured this machine" in text
    assert "observed: no run yet" in text
    assert hover.range.start.line == line


async def test_no_hover_off_the_knobs(client: LanguageClient, repo: Path):
    train = repo / "train.py"
    uri = open_file(client, train)
    line = line_of(train.read_text(), "model.train()")
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=3)))
    assert hover is None
