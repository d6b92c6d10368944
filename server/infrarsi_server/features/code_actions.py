"""Code actions: a quick fix per patch site, promoted launch settings on the knob definitions,
the probe in a training loop, and the source action that optimizes the whole workload.

Every edit comes from the core's own rewrite (the patch's libcst codemod, ``set_defaults``, the
probe codemod) as whole-line TextEdits. Each is a libcst pass over the whole document, so it is
computed on ``codeAction/resolve`` when the client supports it (the patch's rewrite in an
analysis process): listing the actions stays a lookup in the document's analysis.
"""

from __future__ import annotations

import asyncio

from lsprotocol import types

from infrarsi.codemods.insert_probe import insert_probe
from infrarsi.knobs.rewrite import set_defaults
from infrarsi.patches import REGISTRY
from infrarsi_server import convert, evidence
from infrarsi_server.analysis import Analysis
from infrarsi_server.documents import DocumentView, view
from infrarsi_server.server import InfraRSIServer

OPTIMIZE_KIND = "source.infrarsi.optimize"
SETTINGS_KIND = "refactor.rewrite.infrarsi.settings"
PROBE_KIND = "refactor.rewrite.infrarsi.probe"
KINDS = [types.CodeActionKind.QuickFix, SETTINGS_KIND, PROBE_KIND, OPTIMIZE_KIND]


def _wanted(kind: str, only: list[str] | None) -> bool:
    return not only or any(kind == o or kind.startswith(o + ".") for o in only)


def _touches(first: int, last: int, rng: types.Range) -> bool:
    """Lines ``first..last`` (1-based) overlap the request's range."""
    return first - 1 <= rng.end.line and rng.start.line <= last - 1


def _edit(uri: str, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    return types.WorkspaceEdit(changes={uri: edits})


def _patch_fixes(v: DocumentView, analysis: Analysis, params: types.CodeActionParams) -> list[types.CodeAction]:
    out = []
    for finding in analysis.patches:
        if not any(_touches(s.start_line, s.end_line, params.range) for s in finding.sites):
            continue
        related = [d for d in params.context.diagnostics if d.code == finding.name]
        out.append(types.CodeAction(
            title=f"InfraRSI: apply patch {finding.name} — {REGISTRY[finding.name].DESCRIPTION}",
            kind=types.CodeActionKind.QuickFix,
            diagnostics=related or None,
            data={"action": "patch", "uri": v.uri, "patch": finding.name},
        ))
    return out


def _settings(v: DocumentView, analysis: Analysis) -> dict[str, object]:
    """Promoted values of the knobs defined in this document (those differing from the default)."""
    run = v.snapshot.run
    values = {}
    for found in analysis.knobs:
        value = evidence.promoted_value(run, found.knob) if run is not None else None
        if value is not None:
            values[found.knob.name] = value
    return values


def _settings_action(v: DocumentView, analysis: Analysis, params: types.CodeActionParams) -> types.CodeAction | None:
    values = _settings(v, analysis)
    lines = [k.line for k in analysis.knobs if k.knob.name in values]
    if not values or not any(_touches(line, line, params.range) for line in lines):
        return None
    listed = ", ".join(f"{k}={val}" for k, val in values.items())
    return types.CodeAction(title=f"InfraRSI: apply promoted launch settings ({listed})", kind=SETTINGS_KIND,
                            data={"action": "settings", "uri": v.uri})


def _probe_action(v: DocumentView, analysis: Analysis, params: types.CodeActionParams) -> types.CodeAction | None:
    if analysis.loop is None or analysis.has_probe or not _touches(*analysis.loop, params.range):
        return None
    return types.CodeAction(title="InfraRSI: insert probe in this training loop", kind=PROBE_KIND,
                            data={"action": "probe", "uri": v.uri})


def _optimize_action(v: DocumentView) -> types.CodeAction:
    # a command and no edit: an action carrying both loses its edit in some clients' converters
    return types.CodeAction(
        title="InfraRSI: Optimize this workload",
        kind=OPTIMIZE_KIND,
        command=types.Command(title="InfraRSI: Optimize this workload", command="infrarsi.server.optimize",
                              arguments=[{"workspace": str(v.snapshot.root)}]),
    )


def _rewrite(v: DocumentView, analysis: Analysis, action: str) -> str:
    """The document's text after a settings or probe action: the core's rewrite of the current text."""
    if action == "settings":
        values = _settings(v, analysis)
        return set_defaults(v.text, values) if values else v.text
    contract = v.snapshot.contract
    distributed = contract is not None and contract.workload.launcher == "torchrun"
    return insert_probe(v.text, distributed=distributed).code


async def _resolve(server: InfraRSIServer, action: types.CodeAction) -> types.CodeAction:
    data = action.data if isinstance(action.data, dict) else {}
    v = view(server, data.get("uri", ""))
    if v is None or data.get("action") not in ("settings", "probe", "patch"):
        return action
    if data["action"] == "patch":
        if data.get("patch") in REGISTRY:
            edits = await v.fix(server, data["patch"])
            action.edit = _edit(v.uri, edits) if edits else None
        return action
    analysis = await v.analysis(server)
    new = await asyncio.to_thread(_rewrite, v, analysis, data["action"])
    if new != v.text:
        action.edit = _edit(v.uri, convert.text_edits(v.text, new, server.workspace.position_codec))
    return action


def _resolves_edits(server: InfraRSIServer) -> bool:
    support = server.client_capabilities.text_document
    support = support.code_action.resolve_support if support and support.code_action else None
    return support is not None and "edit" in support.properties


async def code_actions(server: InfraRSIServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    v = view(server, params.text_document.uri)
    if v is None or v.rel is None or v.path.suffix != ".py":
        return []
    only = params.context.only
    analysis = await v.analysis(server)
    actions: list[types.CodeAction] = []
    lazy: list[types.CodeAction | None] = []
    if _wanted(types.CodeActionKind.QuickFix, only):
        lazy += _patch_fixes(v, analysis, params)
    if _wanted(SETTINGS_KIND, only):
        lazy.append(_settings_action(v, analysis, params))
    if _wanted(PROBE_KIND, only):
        lazy.append(_probe_action(v, analysis, params))
    for action in filter(None, lazy):
        actions.append(action if _resolves_edits(server) else await _resolve(server, action))
    if _wanted(OPTIMIZE_KIND, only):
        actions.append(_optimize_action(v))
    return actions


def setup(server: InfraRSIServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=KINDS, resolve_provider=True))
    async def code_action(ls: InfraRSIServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return await code_actions(ls, params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: InfraRSIServer, action: types.CodeAction) -> types.CodeAction:
        return await _resolve(ls, action)
