"""`infrarsi optimize PATH "<goal>" [--trials N | --minutes M] [--apply] [--no-bank] [-- command…]`: the whole
job in one command; after ``--``, the command the owner trains with (as for `infrarsi init`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from infrarsi.cli import outcome
from infrarsi.cli import report as report_cli
from infrarsi.cli.console import ProgressSink, add_sandbox_flag, add_wait_flag, console, emit_json, err
from infrarsi.cli.init import command_cwd
from infrarsi.records import RunStatus
from infrarsi.stages.optimize import optimize


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "optimize",
        help='init, doctor, run, report (and apply) in one go: infrarsi optimize PATH "faster, fit in 12 GiB"',
        description="Understands the goal (\"faster\", \"fit in 12 GiB\", \"at most 30 trials\", \"20 minutes\", "
        "\"don't touch data.py\"), then runs each stage the repo's .infrarsi/ state still needs.",
    )
    p.add_argument("path", type=Path, help="the training repository")
    p.add_argument("goal", nargs="?", default="faster", help='what you want (default: "faster")')
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--trials", type=int, metavar="N", help="search trials (overrides the goal's)")
    budget.add_argument("--minutes", type=float, metavar="M", help="search time budget (overrides the goal's)")
    p.add_argument("--apply", action="store_true", help="commit the promoted candidate on a new branch")
    p.add_argument("--repeats", type=int, default=3, help="doctor's baseline runs (default 3)")
    p.add_argument("--storage", metavar="URL", help="Optuna storage URL (default: sqlite under .infrarsi/)")
    p.add_argument("--no-bank", action="store_true",
                   help="neither read nor write the experience bank (see `infrarsi bank show`)")
    p.add_argument("--cwd", type=Path, metavar="DIR",
                   help="where the command after -- runs (default: the current directory when it is inside "
                        "PATH, else PATH)")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.add_argument("--verbose", action="store_true", help="print the report's full tables after the outcome")
    add_sandbox_flag(p)
    add_wait_flag(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    command = getattr(args, "workload_command", None)
    cwd = command_cwd(args.path, args.cwd) if command is not None else None
    with ProgressSink() as progress:
        result = optimize(args.path, args.goal, trials=args.trials, minutes=args.minutes, do_apply=args.apply,
                          doctor_repeats=args.repeats, storage=args.storage, use_bank=not args.no_bank,
                          on_event=progress, sandbox=args.sandbox, command=command, cwd=cwd,
                          wait_for_quiet=args.wait_for_quiet)
    if args.json:
        emit_json({
            "status": result.status, "message": result.message, "stages": result.stages,
            "run": result.run.to_dict() if result.run else None,
            "report": result.report.paths if result.report else None,
            "apply": None if result.apply is None else {"status": result.apply.status, "branch": result.apply.branch,
                                                        "commit": result.apply.commit, "message": result.apply.message},
        })
    elif result.status is RunStatus.ERROR:
        err(result.message)
    else:
        for line in outcome.lines(result, console.width, str(args.path)):
            console.print(line, markup=False, highlight=False)
        if args.verbose and result.report is not None and result.report.status == "ok" \
                and result.report.report is not None:  # set whenever ok
            console.print()
            report_cli.render(result.report.report)
    if result.status is RunStatus.ERROR and result.stages[-1:] == ["init"]:
        return 2  # init's bad input: the repo or the command after --, as `infrarsi init` says it
    return {RunStatus.OK: 0, RunStatus.NO_PROMOTION: 0, RunStatus.INTERRUPTED: 130}.get(result.status, 1)
