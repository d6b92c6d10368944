"""`infrarsi apply PATH [--candidate ID] [--dry-run] [--json]`: commit the promoted change on a new branch."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

from infrarsi.cli.console import console, emit_json, err
from infrarsi.cli.fit import print_diff, print_framed
from infrarsi.contract import ContractError
from infrarsi.stages.apply import ApplyStatus, apply


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "apply",
        help="commit the promoted candidate on a new branch infrarsi/<run-id>, with the evidence",
        description="Applies the promoted candidate's patches and launch settings in a temporary git worktree "
        "at the contract's base commit and commits them on a new branch; your working tree is not touched. "
        "Refuses when files in the editable scope have uncommitted changes.",
    )
    p.add_argument("path", nargs="?", default=".", type=Path, help="the repository (default: .)")
    p.add_argument("--candidate", type=int, metavar="ID", help="trial number of a promoted candidate (default: the best)")
    p.add_argument("--dry-run", action="store_true", help="show the diff and the commit message; write nothing")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        result = apply(args.path, candidate=args.candidate, dry_run=args.dry_run)
    except ContractError as error:
        err(str(error))
        return 2
    if args.json:
        emit_json(asdict(result))
        return 0 if result.status in (ApplyStatus.COMMITTED, ApplyStatus.DRY_RUN) else 1
    if result.status not in (ApplyStatus.COMMITTED, ApplyStatus.DRY_RUN):
        err(result.message)
        return 1
    if result.diff:
        print_diff(console, result.diff)
    print_framed(console, result.commit_message, result.message)
    if result.status is ApplyStatus.COMMITTED:
        console.print(f"review with: git show {result.branch}")
    return 0
