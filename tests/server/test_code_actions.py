"""Code actions: the patch quick fix, the probe, the optimize source action."""

from __future__ import annotations

import shutil
from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

from infrarsi.codemods.insert_probe import insert_probe
from infrarsi.patches import REGISTRY
from tests.server.lsp import apply_edits, diagnostics_for, line_of, open_file, raw_request

TEST_DATA = Path(__file__).resolve().parents[1] / "test_data" / "server"


def _at(uri: str, line: int, diagnostics=(), only=None) -> types.CodeActionParams:
    return types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=line, character=8), end=types.Position(line=line, character=8)),
        context=types.CodeActionContext(diagnostics=list(diagnostics), only=only),
    )


async def test_quick_fix_applies_the_patch_rewrite(client: LanguageClient, repo: Path):
    model = repo / "model.py"
    source = model.read_text()
    uri = open_file(client, model)
    sdpa = [d for d in await diagnostics_for(client, uri) if d.code == "sdpa_attention"]
    actions = await client.text_document_code_action_async(_at(uri, sdpa[0].range.start.line + 1, sdpa))
    fixes = [a for a in actions if isinstance(a, types.CodeAction) and a.kind == types.CodeActionKind.QuickFix]
    assert [f.title.split(" — ")[0] for f in fixes] == ["InfraRSI: apply patch sdpa_attention"]
    fix = fixes[0]
    assert list(fix.diagnostics) == sdpa
    assert fix.edit is None, "listing the actions computes no rewrite: the client resolves the one it applies"
    fix = await client.code_action_resolve_async(fix)
    patched = apply_edits(source, fix.edit.changes[uri])
    assert patched == REGISTRY["sdpa_attention"].rewrite(source)
    assert "scaled_dot_product_attention" in patched


async def test_no_quick_fix_away_from_the_site(client: LanguageClient, repo: Path):
    model = repo / "model.py"
    uri = open_file(client, model)
    await diagnostics_for(client, uri)
    actions = await raw_request(client, types.TEXT_DOCUMENT_CODE_ACTION, _at(uri, line_of(model.read_text(), "class MLP")))
    assert [a["kind"] for a in actions] == ["source.infrarsi.optimize"]


async def test_optimize_source_action_is_a_command(client: LanguageClient, repo: Path):
    uri = open_file(client, repo / "train.py")
    actions = await raw_request(client, types.TEXT_DOCUMENT_CODE_ACTION,
                                _at(uri, 0, only=[types.CodeActionKind.Source]))
    assert actions == [{
        "title": "InfraRSI: Optimize this workload",
        "kind": "source.infrarsi.optimize",
        "command": {"title": "InfraRSI: Optimize this workload", "command": "infrarsi.server.optimize",
                    "arguments": [{"workspace": str(repo.resolve())}]},
    }]


async def test_insert_probe_in_the_training_loop(client: LanguageClient, repo: Path):
    train = repo / "train.py"
    shutil.copy(TEST_DATA / "train_without_probe.py", train)
    source = train.read_text()
    uri = open_file(client, train)
    line = line_of(source, "loss.backward()")
    actions = await client.text_document_code_action_async(_at(uri, line))
    probe = [a for a in actions if isinstance(a, types.CodeAction) and a.kind == "refactor.rewrite.infrarsi.probe"]
    assert len(probe) == 1 and probe[0].edit is None, "the edit comes on resolve"
    resolved = await client.code_action_resolve_async(probe[0])
    patched = apply_edits(source, resolved.edit.changes[uri])
    assert patched == insert_probe(source).code
    assert "probe.step(loss=loss.item(), tokens=X.numel())" in patched
    # outside the loop there is nothing to insert
    outside = await client.text_document_code_action_async(_at(uri, line_of(source, "def get_batch")))
    assert not [a for a in outside if getattr(a, "kind", None) == "refactor.rewrite.infrarsi.probe"]
