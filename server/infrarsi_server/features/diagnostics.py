"""Diagnostics on open and save: patch sites, edited locked files, knobs with their measured effects."""

from __future__ import annotations

import hashlib

from lsprotocol import types

from infrarsi_server import convert, evidence
from infrarsi_server.documents import DocumentView, view
from infrarsi_server.server import InfraRSIServer

SOURCE = "InfraRSI"
LOCKED = "locked-file-edited"
UNANALYSED = "not-analysed"


def _locked(v: DocumentView) -> list[types.Diagnostic]:
    contract = v.snapshot.contract
    if contract is None or v.rel not in contract.scope.locked:
        return []
    if hashlib.sha256(v.text.encode()).hexdigest() == contract.scope.locked[v.rel]:
        return []
    return [types.Diagnostic(
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=1, character=0)),
        severity=types.DiagnosticSeverity.Warning,
        source=SOURCE,
        code=LOCKED,
        message=(f"{v.rel} is locked by the InfraRSI contract and has been edited since init: trials refuse "
                 f"to run until it is restored (git checkout -- {v.rel}) or `infrarsi init` accepts the change."),
    )]


async def diagnostics(server: InfraRSIServer, v: DocumentView) -> list[types.Diagnostic]:
    out = _locked(v)
    if v.path.suffix != ".py" or v.rel is None:
        return out
    analysis = await v.analysis(server)
    codec = server.workspace.position_codec
    run = v.snapshot.run
    if analysis.problem:
        out.append(types.Diagnostic(
            range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
            severity=types.DiagnosticSeverity.Information, source=SOURCE, code=UNANALYSED, message=analysis.problem))
    for finding in analysis.patches:
        status = evidence.patch_status(run, finding.name)
        for site in finding.sites:
            out.append(types.Diagnostic(
                range=convert.site_range(analysis.lines, codec, site),
                severity=types.DiagnosticSeverity.Information,
                source=SOURCE,
                code=finding.name,
                message=f"{finding.name}: {site.message} — {status}",
                data={"patch": finding.name},
            ))
    for knob_line in analysis.knobs:
        measured = evidence.setting_lines(run, knob_line.knob) if run is not None else []
        promoted = evidence.promoted_value(run, knob_line.knob)
        if promoted is not None:
            measured.insert(0, f"promoted: {knob_line.knob.name}={promoted}")
        if measured:
            out.append(types.Diagnostic(
                range=convert.line_range(analysis.lines, codec, knob_line.line),
                severity=types.DiagnosticSeverity.Hint,
                source=SOURCE,
                code="knob",
                message=f"InfraRSI measured {knob_line.knob.name} ({knob_line.knob.role}): " + "; ".join(measured),
                data={"knob": knob_line.knob.name},
            ))
    return out


async def publish(server: InfraRSIServer, uri: str) -> None:
    v = view(server, uri)
    if v is None:
        return
    found = await diagnostics(server, v)
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, diagnostics=found, version=v.document.version))


async def refresh(server: InfraRSIServer) -> None:
    """Publish again for every open document: the state on disk changed (a stage finished)."""
    for uri in list(server.workspace.text_documents):
        await publish(server, uri)


def setup(server: InfraRSIServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: InfraRSIServer, params: types.DidOpenTextDocumentParams) -> None:
        await publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: InfraRSIServer, params: types.DidSaveTextDocumentParams) -> None:
        await publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: InfraRSIServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))
