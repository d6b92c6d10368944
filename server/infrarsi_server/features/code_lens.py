"""A code lens over the training loop: baseline vs best verified step time, and the speedup."""

from __future__ import annotations

import statistics

from lsprotocol import types

from infrarsi_server.documents import view
from infrarsi_server.server import InfraRSIServer
from infrarsi_server.state import Snapshot


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms/step"


def title(snapshot: Snapshot) -> tuple[str, str]:
    """The lens's text and the server command a click runs."""
    run, doctor = snapshot.run, snapshot.doctor
    promoted = run.promoted if run is not None else None
    if promoted is not None and promoted.base_step_s and promoted.cand_step_s:
        base, best = statistics.median(promoted.base_step_s), statistics.median(promoted.cand_step_s)
        point, low, _ = promoted.job_speedup or (base / best, float("nan"), None)
        return (f"InfraRSI: baseline {_ms(base)} → verified {_ms(best)}, {point:.2f}× faster "
                f"(95% CI low {low:.2f}×, run {run.run_id})", "infrarsi.server.report")
    if doctor is not None:
        tail = f"no verified speedup in run {run.run_id}" if run is not None else "not optimized yet"
        return f"InfraRSI: baseline {_ms(doctor.noise.step_s)} (noise floor {doctor.noise.min_speedup:.3f}×) · {tail}", \
            "infrarsi.server.optimize"
    return "InfraRSI: not measured yet — optimize this workload", "infrarsi.server.optimize"


def setup(server: InfraRSIServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def code_lens(ls: InfraRSIServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        v = view(ls, params.text_document.uri)
        if v is None or v.rel is None or v.path.suffix != ".py":
            return []
        analysis = await v.analysis(ls)
        if analysis.loop is None:
            return []
        text, command = title(v.snapshot)
        line = analysis.loop[0] - 1
        return [types.CodeLens(
            range=types.Range(start=types.Position(line=line, character=0), end=types.Position(line=line, character=0)),
            command=types.Command(title=text, command=command, arguments=[{"workspace": str(v.snapshot.root)}]),
        )]
