"""One console for the CLI: rich on a terminal, plain text otherwise, JSON for scripts."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console

from infrarsi.events import Event, clock

if TYPE_CHECKING:
    from rich.progress import TaskID

console = Console(highlight=False)
stderr = Console(stderr=True, highlight=False)


def add_sandbox_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-sandbox", dest="sandbox", action="store_false",
                        help="run trials outside the bubblewrap sandbox (where bwrap cannot run): they then see "
                        "your files, home and network; recorded in the run and the report")


DEFAULT_QUIET_WAIT_S = 600.0


def add_wait_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait-for-quiet", dest="wait_for_quiet", nargs="?", type=float, const=DEFAULT_QUIET_WAIT_S,
                        default=None, metavar="SECONDS",
                        help="when other processes take the job's cores, wait for quiet before measuring and before "
                        f"rerunning a disturbed trial, at most SECONDS in all (default {DEFAULT_QUIET_WAIT_S:.0f}); "
                        "the time waited is reported")


def err(message: str) -> None:
    stderr.print(f"[bold red]error:[/] {message}", soft_wrap=True)  # one line, whatever the width


def emit_json(data: Any) -> None:
    """Write one JSON document to stdout (for --json)."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def _readable(event: Event, started: float | None) -> str:
    """A finished trial as ``trial 3 of 20, 1 min 40 s: ok, 412 ms a step (micro_batch=8)``."""
    data = event.data
    if event.stage != "run" or "status" not in data or not event.total:
        return event.message
    elapsed = f", {clock(time.monotonic() - started)}" if started is not None else ""
    step = f", {data['step_s'] * 1000:.0f} ms a step" if data.get("step_s") else ""
    if data.get("kind") == "verification":  # reruns of the best against the baseline: not search trials
        return f"re-verifying{elapsed}: {data['status']}{step}"
    kind = f" ({data['kind']})" if data.get("kind") not in (None, "search") else ""
    return f"trial {event.done} of {event.total}{elapsed}: {data['status']}{step}{kind}"


class ProgressSink:
    """Renders stage events: a progress bar with one line per finished unit (trial, rerun) on stderr.

    Use as a context manager; it is an EventSink. Outside a terminal it prints plain lines only."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=stderr, transient=True, disable=not stderr.is_terminal,
        )
        self.tasks: dict[str, TaskID] = {}
        self.run_started: float | None = None

    def __enter__(self) -> ProgressSink:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def __call__(self, event: Event) -> None:
        if event.stage == "trial":
            return
        task = self.tasks.get(event.stage)
        if task is None:
            task = self.tasks[event.stage] = self.progress.add_task(event.stage, total=event.total)
        if event.kind == "begin":
            if event.stage == "run":
                self.run_started = time.monotonic()
            search = event.stage == "run" and event.total
            description = f"run: up to {event.total} trials" if search else f"{event.stage}: {event.message}"
            self.progress.update(task, total=event.total, description=description)
        elif event.kind == "report":
            self.progress.update(task, completed=event.done, total=event.total)
            self.progress.console.print(f"[dim]{event.stage}[/] {_readable(event, self.run_started)}")
        elif event.kind == "end":
            self.progress.update(task, completed=event.total or event.done)
            if event.message:
                self.progress.console.print(f"[bold]{event.stage}[/] {event.message}")
        elif event.kind == "log":
            self.progress.console.print(f"[dim]{event.stage}[/] {event.message}")
