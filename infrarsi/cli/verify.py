"""`infrarsi verify PATH REV [--json]`: does a promoted commit's speedup still hold? Exit 1 if not."""

from __future__ import annotations

import argparse
from pathlib import Path

from infrarsi.cli.console import ProgressSink, add_sandbox_flag, console, emit_json, err
from infrarsi.contract import ContractError, load_contract
from infrarsi.stages.verify import VerifyStatus, verify
from infrarsi.whole_process import Rounds


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify",
        help="rerun a commit and its base interleaved: does the recorded speedup still hold?",
        description="Checks out REV and its base in temporary worktrees, runs them interleaved under the "
        "contract, and says whether REV is still faster: the speedup's 95% interval above the promotion floor. Exits 1 when it is not "
        "(usable in CI).",
    )
    p.add_argument("path", type=Path, help="the repository")
    p.add_argument("rev", help="the commit to check (e.g. infrarsi/<run-id>)")
    p.add_argument("--rounds", type=int, metavar="N",
                   help="at most this many interleaved rounds (default: the contract's [verify] most_rounds, "
                   f"{Rounds().most} without one); it stops earlier, from least_rounds on, once the interval decides")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_sandbox_flag(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.rounds is not None and args.rounds < 2:
        err(f"--rounds must be at least 2 for an interval, got {args.rounds}")
        return 2
    try:
        rounds = None
        if args.rounds is not None:
            policy = load_contract(args.path).verify_policy
            rounds = Rounds(least=min(policy.least_rounds, args.rounds), most=args.rounds)
        with ProgressSink() as progress:
            result = verify(args.path, args.rev, rounds=rounds, on_event=progress, sandbox=args.sandbox)
    except ContractError as error:
        err(str(error))
        return 2
    if args.json:
        emit_json(result.to_dict())
    elif result.status is VerifyStatus.ERROR:
        err(result.message)
    else:
        color = "green" if result.status is VerifyStatus.HOLDS else "red"
        console.print(f"[bold {color}]{result.message}[/]")
    return 0 if result.status is VerifyStatus.HOLDS else 1
