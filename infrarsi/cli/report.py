"""`infrarsi report PATH [--format text|md|html|json]`: what the run measured, in tables or files."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from infrarsi.cli.console import console, emit_json, err
from infrarsi.report import tables
from infrarsi.report.document import Code, Heading, Items, Text, change_blocks, reproduce_blocks
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
    p.add_argument("--storage", metavar="URL", help="the run's study storage with its password "
                   "(run.json keeps it hidden); default: the one run.json names")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    formats = (args.format,) if args.format in ("md", "html") else ()
    result = report(args.path, formats=formats, storage=args.storage)
    if result.status != "ok":
        err(result.message)
        return EXIT.get(result.status, 1)
    if args.format == "json":
        emit_json(result.report.to_dict())
    elif args.format == "text":
        render(result.report)
    else:
        for path in result.paths:
            console.print(f"wrote {path}")
    return 0


def _rich_table(table: tables.Table) -> Table:
    out = Table(title=table.title, title_justify="left", title_style="bold")
    for column in table.columns:
        out.add_column(column, overflow="fold")
    for row in table.rows:
        out.add_row(*[_mark(c) for c in row])
    return out


def _mark(cell: str) -> str:
    """A cell as rich markup: its own brackets escaped, a miscalibrated prior in red."""
    return f"[bold red]{escape(cell)}[/]" if cell == tables.MISCALIBRATED else escape(cell)


def _print_table(table: tables.Table) -> None:
    if not table.rows:
        return
    console.print(_rich_table(table))
    if table.caption:
        console.print(table.caption, style="dim", markup=False)
    console.print()


def _print_blocks(blocks) -> None:
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
                console.print(Syntax(text, "diff", theme="ansi_dark", background_color="default"))
            case Code(text, _):
                console.print(Panel(text, expand=False, title="reproduce"))


def render(r: Report) -> None:
    console.print(f"[bold]report[/] {r.repo}  [dim]run {r.run_id} ({r.sampler}), {r.hardware}; sandbox: {r.sandbox}[/]")
    console.print(f"{r.run_status}: {r.run_message}", markup=False)
    for note in r.notes:
        console.print(f"[yellow]caveat:[/] {note}")
    for line in r.interference:
        console.print(f"interference: {line}", markup=False)
    console.print()
    _print_table(tables.comparison(r))
    promoted = r.promoted_audit
    if promoted is not None:
        _print_blocks(reproduce_blocks(promoted, r.repo))
        console.print()
    _print_table(tables.verdicts(r))
    for audit in r.audits:
        _print_blocks(change_blocks(audit))
    if r.audits:
        console.print()
    for table in (tables.statuses(r), tables.prices(r), tables.priors(r), tables.bank(r), tables.patch_checks(r),
                  tables.trials(r)):
        _print_table(table)
