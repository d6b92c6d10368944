"""What the editor shows once a run promoted a candidate: verified sites, settings, the lens."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

from infrarsi.knobs.rewrite import set_defaults
from tests.server.lsp import apply_edits, diagnostics_for, line_of, open_file
from tests.server.runs import promoted_run


async def test_patch_site_carries_the_verified_effect_and_run_id(client: LanguageClient, repo: Path):
    run = promoted_run(repo)
    uri = open_file(client, repo / "model.py")
    [sdpa] = [d for d in await diagnostics_for(client, uri) if d.code == "sdpa_attention"]
    assert f"verified in run {run.run_id}: part of the promoted candidate, 1.21× faster (95% CI low 1.12×)" \
        in sdpa.message
    assert "not yet verified" not in sdpa.message


async def test_promoted_settings_on_the_knob_line(client: LanguageClient, repo: Path):
    promoted_run(repo)
    train = repo / "train.py"
    source = train.read_text()
    uri = open_file(client, train)
    line = line_of(source, '"--micro_batch_size"')
    knobs = [d for d in await diagnostics_for(client, uri) if d.code == "knob"]
    assert [(d.range.start.line, d.severity) for d in knobs] == [(line, types.DiagnosticSeverity.Hint)]
    assert "promoted: micro_batch_size=8" in knobs[0].message

    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=line, character=4), end=types.Position(line=line, character=4)),
        context=types.CodeActionContext(diagnostics=[])))
    [settings] = [a for a in actions if isinstance(a, types.CodeAction) and a.kind == "refactor.rewrite.infrarsi.settings"]
    assert settings.title == "InfraRSI: apply promoted launch settings (micro_batch_size=8)"
    resolved = await client.code_action_resolve_async(settings)
    assert apply_edits(source, resolved.edit.changes[uri]) == set_defaults(source, {"micro_batch_size": 8})


async def test_lens_shows_baseline_and_verified_step_time(client: LanguageClient, repo: Path):
    run = promoted_run(repo)
    uri = open_file(client, repo / "train.py")
    [lens] = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert lens.command.title == (f"InfraRSI: baseline 50 ms/step → verified 40 ms/step, 1.21× faster "
                                  f"(95% CI low 1.12×, run {run.run_id})")
    assert lens.command.command == "infrarsi.server.report"
