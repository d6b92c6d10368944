"""Commands ``infrarsi.server.{init,doctor,optimize,apply,report}``: thin calls into the stages.

Each takes one argument object: ``workspace`` (the repo; default: the first workspace folder),
an optional ``workDoneToken`` (the extension puts its token there, since pygls hands a command
only its arguments) and the command's own options. Long stages run as jobs off the event loop,
report work-done progress and end with RequestCancelled when the client cancels them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams, JsonRpcRequestCancelled
from pygls.uris import to_fs_path

from infrarsi.events import EventSink
from infrarsi.records import run_path
from infrarsi_server.features import diagnostics
from infrarsi_server.jobs import Job
from infrarsi_server.progress import WorkDone
from infrarsi_server.server import InfraRSIServer

_background: set[asyncio.Task] = set()
"""Running refreshes (the loop only keeps weak references to tasks)."""


def _options(server: InfraRSIServer, args: tuple) -> tuple[Path, dict[str, Any]]:
    options = dict(args[0]) if args and isinstance(args[0], dict) else {}
    workspace = options.get("workspace")
    if not workspace:
        folders = list(server.workspace.folders.values())
        if not folders:
            raise JsonRpcInvalidParams(message="no workspace given and no workspace folder open")
        workspace = to_fs_path(folders[0].uri)
    root = Path(workspace).expanduser().resolve()
    if not root.is_dir():
        raise JsonRpcInvalidParams(message=f"workspace {root} is not a directory")
    return root, options


async def _job(server: InfraRSIServer, name: str, title: str, options: dict, work: Callable[[EventSink], Any],
               summary: Callable[[Any], str]) -> Any:
    progress = await WorkDone.start(server, options.get("workDoneToken"), title)
    job = Job(name, lambda: work(progress.event))
    server.jobs.track(job, server.protocol.msg_id, progress.token)
    try:
        outcome = await job.result()
    finally:
        server.jobs.forget(job)
    if outcome.status == "cancelled":
        progress.end("cancelled")
        server.log(f"{name}: cancelled")
        raise JsonRpcRequestCancelled(message=f"{name} cancelled")
    if outcome.status == "error":
        progress.end(f"failed: {outcome.error}")
        server.log(f"{name} failed: {outcome.error}", types.MessageType.Error)
        raise JsonRpcInternalError(message=f"{name} failed: {outcome.error}")
    text = summary(outcome.value)
    progress.end(text)
    server.log(f"{name}: {text}")
    # what the stage wrote changes the diagnostics; the answer need not wait for them
    refresh = asyncio.create_task(diagnostics.refresh(server))
    _background.add(refresh)
    refresh.add_done_callback(_background.discard)
    return outcome.value


def _init(repo: Path, options: dict) -> dict:
    from infrarsi.stages.init import init

    result = init(repo, scope=options.get("scope"))
    return {"status": result.status, "summary": result.message, "contract": result.contract_path,
            "entry": result.entry, "editable": result.editable, "locked": result.locked, "warnings": result.warnings}


def _doctor(repo: Path, options: dict, on_event: EventSink) -> dict:
    from infrarsi.stages.doctor import doctor

    done = doctor(repo, repeats=int(options.get("repeats", 3)), on_event=on_event)
    if done.report is None:
        return {"status": done.status, "summary": done.message}
    report = done.report
    return {"status": done.status, "summary": (f"baseline {report.noise.step_s * 1000:.0f} ms/step, noise floor "
                                               f"{report.noise.min_speedup:.3f}×"),
            "findings": report.findings, "warnings": report.warnings}


def _run_summary(result: Any) -> dict:
    promoted = result.promoted.candidate.to_dict() if result.promoted else None
    return {"status": result.status, "summary": result.message, "run_id": result.run_id, "promoted": promoted,
            "trials": len(result.trials)}


def _optimize(repo: Path, options: dict, on_event: EventSink) -> dict:
    """The core's optimize stage: init, doctor and run as the repo's state needs them, then report."""
    from infrarsi.stages.optimize import optimize

    result = optimize(repo, options.get("goal") or "faster", trials=options.get("trials"),
                      minutes=options.get("minutes"), doctor_repeats=int(options.get("repeats", 3)), on_event=on_event)
    if result.run is None:
        return {"status": result.status, "summary": result.message, "stages": result.stages}
    return {**_run_summary(result.run), "stages": result.stages}


def _apply(repo: Path, options: dict) -> dict:
    from infrarsi.stages.apply import apply

    result = apply(repo, candidate=options.get("candidate"), dry_run=bool(options.get("dry_run", False)))
    return {"status": result.status, "summary": result.message, "branch": result.branch, "commit": result.commit,
            "paths": result.paths, "flags": result.flags}


def _report(repo: Path) -> dict | None:
    """Write the report; its path (Markdown first) and the run's summary, None before any run."""
    from infrarsi.stages.report import report

    if not run_path(repo).exists():
        return None
    result = report(repo)
    if result.status != "ok":
        raise RuntimeError(result.message)
    return {"path": result.paths[0], "summary": result.message}


def setup(server: InfraRSIServer) -> None:
    @server.command("infrarsi.server.init")
    async def init_command(ls: InfraRSIServer, *args: Any) -> dict:
        repo, options = _options(ls, args)
        return await _job(ls, "init", "InfraRSI: init", options, lambda _sink: _init(repo, options), lambda r: r["summary"])

    @server.command("infrarsi.server.doctor")
    async def doctor_command(ls: InfraRSIServer, *args: Any) -> dict:
        repo, options = _options(ls, args)
        return await _job(ls, "doctor", "InfraRSI: doctor", options, lambda sink: _doctor(repo, options, sink),
                          lambda r: r["summary"])

    @server.command("infrarsi.server.optimize")
    async def optimize_command(ls: InfraRSIServer, *args: Any) -> dict:
        repo, options = _options(ls, args)
        return await _job(ls, "optimize", "InfraRSI: optimize", options, lambda sink: _optimize(repo, options, sink),
                          lambda r: r["summary"])

    @server.command("infrarsi.server.apply")
    async def apply_command(ls: InfraRSIServer, *args: Any) -> dict:
        repo, options = _options(ls, args)
        return await _job(ls, "apply", "InfraRSI: apply", options, lambda _sink: _apply(repo, options), lambda r: r["summary"])

    @server.command("infrarsi.server.report")
    async def report_command(ls: InfraRSIServer, *args: Any) -> dict | None:
        repo, options = _options(ls, args)
        return await _job(ls, "report", "InfraRSI: report", options, lambda _sink: _report(repo),
                          lambda r: r["summary"] if r else "no run yet: nothing to report")

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(ls: InfraRSIServer, params: types.WorkDoneProgressCancelParams) -> None:
        ls.jobs.cancel_token(params.token)
