"""`infrarsi report PATH [--format text|md|html|json] [--verbose]`: what the run measured, in tables or files."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.text import Text as RichText

from infrarsi.cli.console import console, emit_json, err
from infrarsi.cli.fit import print_diff, print_framed, print_table
from infrarsi.report import tables
from infrarsi.report.document import (
    Block,
    Code,
    Heading,
    Items,
    Text,
    change_blocks,
    no_promotion_blocks,
    reproduce_blocks,
)
from infrarsi.report.model import Report
from infrarsi.stages.report import report

EXIT = {"ok": 0, "refused": 2, "error": 1}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="the run's speedup with confidence, MFU, failed trials and their cost, memory prices, priors",
        description="Gathers what doctor and run measured: baseline against the promoted candidate with a 95% "
        "confidence interval, every trial by status with its wall-clock cost, per-setting memory prices, "
        "priors against observed effects, the exact source hunks each verified candidate touches, and the "
        "command that reproduces the promoted configuration.",
    )
    p.add_argument("path", nargs="?", default=".", type=Path, help="the repository (default: .)")
    p.add_argument("--format", choices=("text", "md", "html", "json"), default="text",
                   help="text: tables here; md, html: write .infrarsi/report.* with plots; json: the report as JSON")
    p.add_argument("--verbose", action="store_true",
                   help="text: every table as a table, however wide (for wide terminals); by default a table "
                   "too wide for the terminal is shown as one block of labelled values per row")
    p.add_argument("--storage", metavar="URL", help="the run's study storage with its password "
                   "(run.json keeps it hidden); default: the one run.json names")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    formats = (args.format,) if args.format in ("md", "html") else ()
    result = report(args.path, formats=formats, storage=args.storage)
    if result.status != "ok" or result.report is None:  # an ok result carries its report
        err(result.message)
        return EXIT.get(result.status, 1)
    if args.format == "json":
        emit_json(result.report.to_dict())
    elif args.format == "text":
        render(result.report, verbose=args.verbose)
    else:
        for path in result.paths:
            console.print(f"wrote {path}")
    return 0


def _cell(cell: str) -> str | RichText:
    """A miscalibrated prior in red."""
    return RichText(cell, style="bold red") if cell == tables.MISCALIBRATED else cell


def _print_table(table: tables.Table, verbose: bool) -> None:
    if not table.rows:
        return
    print_table(console, table.title, table.columns, [[_cell(c) for c in row] for row in table.rows], wide=verbose)
    if table.caption:  # after a blank line: below label-value blocks it would read as one more value
        console.print()
        console.print(table.caption, style="dim", markup=False)
    console.print()


def _print_blocks(blocks: list[Block]) -> None:
    for block in blocks:
        match block:
            case Heading(text, _):
                console.print(text, style="bold", markup=False)
            case Text(text):
                console.print(text, markup=False)
            case Items(items):
                for item in items:
                    console.print(f"  • {item}", markup=False)
            case Code(text, "diff"):
                print_diff(console, text)
            case Code(text, _):
                print_framed(console, text, "reproduce")


def render(r: Report, verbose: bool = False) -> None:
    console.print(f"[bold]report[/] {r.repo}  [dim]run {r.run_id} ({r.sampler}), {r.hardware}; sandbox: {r.sandbox}[/]")
    console.print(f"{r.run_status}: {r.run_message}", markup=False)
    for note in r.notes:
        console.print(f"[yellow]caveat:[/] {note}")
    for line in r.interference:
        console.print(f"interference: {line}", markup=False)
    console.print()
    _print_table(tables.comparison(r), verbose)
    promoted = r.promoted_audit
    if promoted is not None:
        _print_blocks(reproduce_blocks(promoted, r.repo))
        console.print()
    if r.no_promotion is not None:
        _print_blocks(no_promotion_blocks(r))
        console.print()
    _print_table(tables.verdicts(r), verbose)
    for audit in r.audits:
        _print_blocks(change_blocks(audit))
    if r.audits:
        console.print()
    for table in (tables.statuses(r), tables.prices(r), tables.priors(r), tables.bank(r), tables.patch_checks(r),
                  tables.trials(r)):
        _print_table(table, verbose)
