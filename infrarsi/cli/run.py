"""`infrarsi run PATH [--trials N | --minutes M] [--sampler …] [--storage URL] [--no-bank] [--json]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from infrarsi.cli.console import ProgressSink, add_sandbox_flag, add_wait_flag, console, emit_json, err
from infrarsi.contract import ContractError
from infrarsi.records import RunResult
from infrarsi.report.disturbance import words as disturbance_words
from infrarsi.search.strategy import SAMPLERS
from infrarsi.stages.run import run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="search launch settings and patches with real trials, then verify the best against the baseline",
        description="Co-optimizes the contract's knobs and the validated patches with real trials (kept in an "
        "Optuna study: stop and run again to continue), re-verifies the top candidates against the baseline "
        "in interleaved order, and promotes one only if its speedup's 95% interval clears the promotion floor.",
    )
    p.add_argument("path", nargs="?", default=".", type=Path, help="the repository (default: .)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--trials", type=int, metavar="N", help="search trials in this invocation (default 20)")
    budget.add_argument("--minutes", type=float, metavar="M", help="wall-clock budget for the search")
    p.add_argument("--sampler", choices=SAMPLERS, default="infrarsi", help="search strategy (default: infrarsi)")
    p.add_argument("--storage", metavar="URL", help="Optuna storage URL (default: sqlite under .infrarsi/)")
    p.add_argument("--seed", type=int, default=0, help="sampler seed")
    p.add_argument("--no-bank", action="store_true", help="do not read or write the experience bank")
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")
    add_sandbox_flag(p)
    add_wait_flag(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        with ProgressSink() as progress:
            result = run(args.path, trials=args.trials, minutes=args.minutes, sampler=args.sampler,
                         storage=args.storage, seed=args.seed, use_bank=not args.no_bank, on_event=progress,
                         sandbox=args.sandbox, wait_for_quiet=args.wait_for_quiet)
    except ContractError as error:
        err(str(error))
        return 2
    if args.json:
        emit_json(result.to_dict())
    else:
        render(result)
    return {"ok": 0, "no_promotion": 0, "interrupted": 130}.get(result.status, 1)


def render(result: RunResult) -> None:
    if result.status == "error":
        err(result.message)
        return
    counts: dict[str, tuple[int, float]] = {}
    for row in result.trials:
        n, s = counts.get(row.status, (0, 0.0))
        counts[row.status] = (n + 1, s + row.wall_s)
    table = Table(title=f"run {result.run_id} ({result.sampler})")
    table.add_column("status")
    table.add_column("trials", justify="right")
    table.add_column("seconds", justify="right")
    for status, (n, s) in sorted(counts.items()):
        table.add_row(status, str(n), f"{s:.0f}")
    console.print(table)
    for line in disturbance_words(result.disturbance):
        console.print(line, markup=False, highlight=False)
    for verdict in result.verdicts:
        mark = "[green]promoted[/]" if verdict.promoted else "[yellow]not promoted[/]"
        console.print(f"{mark} {verdict.candidate.to_dict()}: {verdict.reason}")
    console.print(f"[bold]{result.message}[/]")
