"""Hover on a knob's definition: its role, domain, prior, observed effect and memory price."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from infrarsi.contract import Knob
from infrarsi.settings import setting_key
from infrarsi_server import convert, evidence
from infrarsi_server.analysis import knob_lines
from infrarsi_server.documents import view
from infrarsi_server.server import InfraRSIServer
from infrarsi_server.state import Snapshot

_priors: dict[tuple, Any] = {}
"""Prior tables by snapshot stamp: built once per state of the repo."""


def _prior_table(snapshot: Snapshot) -> Any:
    """The built-in priors for this contract on the hardware doctor measured (None before doctor)."""
    if snapshot.contract is None or snapshot.doctor is None:
        return None
    key = (snapshot.root, snapshot.stamp)
    if key not in _priors:
        from infrarsi.priors.builtin import builtin_table
        from infrarsi.priors.types import PriorContext

        _priors.clear()
        _priors[key] = builtin_table(PriorContext(contract=snapshot.contract, hardware=snapshot.doctor.hardware))
    return _priors[key]


def _prior_lines(snapshot: Snapshot, knob: Knob) -> list[str]:
    table = _prior_table(snapshot)
    if table is None:
        return ["prior: known once doctor has measured this machine"]
    out = []
    for value in knob.domain:
        key = setting_key(knob.name, value)
        if value == knob.default or key not in table:
            continue
        prior = table.get(key)
        out.append(f"prior {key}: step time {prior.time_factor:.2f}×, peak memory {prior.mem_factor:.2f}× "
                   f"({prior.source})")
    return out


def markdown(snapshot: Snapshot, knob: Knob) -> str:
    domain = ", ".join(f"`{v}`" for v in knob.domain) if knob.domain else "fixed"
    lines = [
        f"**InfraRSI knob `{knob.name}`**",
        "",
        f"- role: {knob.role}" + (f" — {knob.help}" if knob.help else ""),
        f"- default: `{knob.default}`; domain: {domain}" + ("" if knob.tunable else " (not tuned)"),
    ]
    lines += [f"- {line}" for line in _prior_lines(snapshot, knob)] if knob.tunable else []
    run = snapshot.run
    if run is None:
        lines.append("- observed: no run yet")
    else:
        measured = evidence.setting_lines(run, knob)
        lines += [f"- observed {line}" for line in measured] or [f"- observed: nothing separable yet (run {run.run_id})"]
        promoted = evidence.promoted_value(run, knob)
        if promoted is not None:
            lines.append(f"- promoted in run {run.run_id}: `{knob.name}={promoted}`, {evidence.promoted_speedup(run)}")
    return "\n".join(lines)


def setup(server: InfraRSIServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: InfraRSIServer, params: types.HoverParams) -> types.Hover | None:
        v = view(ls, params.text_document.uri)
        if v is None or v.snapshot.contract is None or v.rel is None:
            return None
        line = params.position.line + 1
        lines = v.document.lines
        if line > len(lines):
            return None
        # knob definitions are found by a regex over the lines, no parse: fast enough per hover
        for found in knob_lines(v.rel, lines, v.snapshot.contract):
            if found.line == line:
                return types.Hover(
                    contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=markdown(v.snapshot, found.knob)),
                    range=convert.line_range(lines, ls.workspace.position_codec, line),
                )
        return None
