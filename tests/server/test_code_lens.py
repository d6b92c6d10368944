"""The code lens over the training loop."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.server.lsp import line_of, open_file


async def test_lens_over_the_training_loop_before_any_measurement(client: LanguageClient, repo: Path):
    train = repo / "train.py"
    uri = open_file(client, train)
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert len(lenses) == 1
    lens = lenses[0]
    assert lens.range.start.line == line_of(train.read_text(), "for iter_num in range(args.max_iters):")
    assert lens.command.title == "InfraRSI: not measured yet — optimize this workload"
    assert lens.command.command == "infrarsi.server.optimize"


async def test_no_lens_without_a_training_loop(client: LanguageClient, repo: Path):
    uri = open_file(client, repo / "model.py")
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert not lenses
