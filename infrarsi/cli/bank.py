"""`infrarsi bank show [--workload PATH]` and `infrarsi bank forget <FINDING | --run ID | --before DATE>`."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from rich.markup import escape

from infrarsi.bank.inspect import ShowResult, forget, show
from infrarsi.cli.console import console, emit_json, err
from infrarsi.cli.fit import print_table


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bank",
        help="see or edit what the experience bank learned from past runs",
        description="The experience bank holds findings from past runs (per user: ~/.infrarsi/bank.db, or "
        "INFRARSI_BANK_URL). `show` lists them with how far each is trusted today; `forget` deletes them.",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    s = actions.add_parser("show", help="list the bank's runs and findings",
                           description="Every run and its findings; with --workload, only the runs a run in that "
                           "repository would use, and the priors it would start from.")
    s.add_argument("--workload", type=Path, metavar="PATH", help="a repository with a contract (after init)")
    s.add_argument("--url", metavar="URL", help="the bank's database URL (default: INFRARSI_BANK_URL, else the user's)")
    s.add_argument("--json", action="store_true", help="print the bank as JSON")
    s.set_defaults(func=main_show)
    f = actions.add_parser("forget", help="delete findings: one, a setting's, a run's, or all before a date",
                           description="FINDING is a finding's id (from `bank show`) or a setting key such as "
                           "threads=2 or patch:sdpa_attention (every finding of it, and a patch's verdicts).")
    which = f.add_mutually_exclusive_group(required=True)
    which.add_argument("finding", nargs="?", help="a finding id or a setting key")
    which.add_argument("--run", metavar="ID", help="forget one run and everything it recorded")
    which.add_argument("--before", metavar="DATE", help="forget every run recorded before DATE (YYYY-MM-DD)")
    f.add_argument("--url", metavar="URL", help="the bank's database URL (default: INFRARSI_BANK_URL, else the user's)")
    f.add_argument("--json", action="store_true", help="print what was deleted as JSON")
    f.set_defaults(func=main_forget)


def main_show(args: argparse.Namespace) -> int:
    result = show(args.url, workload=args.workload)
    if args.json:
        emit_json(result.to_dict())
    elif result.status != "ok":
        err(result.message)
    else:
        render(result)
    return 0 if result.status == "ok" else 2


def main_forget(args: argparse.Namespace) -> int:
    result = forget(args.url, finding=args.finding, run_id=args.run, before=args.before)
    if args.json:
        emit_json(result.to_dict())
    elif result.status == "error":
        err(result.message)
    else:
        console.print(result.message)
    return {"ok": 0, "not_found": 1}.get(result.status, 2)


def _factor(log_mean: float, sd: float) -> str:
    return f"×{math.exp(log_mean):.2f} [{math.exp(log_mean - sd):.2f}, {math.exp(log_mean + sd):.2f}]"


def render(result: ShowResult) -> None:
    console.print(f"experience bank: {escape(result.to_dict()['url'])}")
    for run in result.runs:
        sim = f", similarity {result.workload.similarity[run.id]:.2f}" if result.workload else ""
        rows = [[str(e.id), e.key, _factor(e.time_log, e.time_sd), _factor(e.time_log, e.trusted_sd), str(e.n),
                 f"{e.noise_cv:.1%}" if e.noise_cv is not None else "unknown"] for e in run.effects]
        title = (f"run {run.id}: {run.recorded_at:%Y-%m-%d %H:%M} UTC, {run.hardware} ({run.hardware_id}), "
                 f"{run.signature}{sim}")
        print_table(console, title, ["id", "setting", "recorded", "read as today (± 1 sd)", "trials", "run noise CV"],
                    rows)
        for patch, verdict in run.verdicts:
            console.print(f"  patch {escape(patch)}: {verdict}")
        for candidate, speedup in run.best:
            console.print(f"  promoted {speedup:.2f}x: {escape(str(candidate))}")
        console.print()
    if result.workload is not None:
        rows = [[p["key"], f"×{p['factor']:.2f} [{p['low']:.2f}, {p['high']:.2f}]", p["source"]]
                for p in result.workload.priors]
        print_table(console, f"priors a run in {result.workload.repo} would start from",
                    ["setting", "bank prior (± 1 sd)", "from"], rows)
        console.print()
    console.print(result.message)
