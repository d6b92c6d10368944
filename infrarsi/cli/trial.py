"""`infrarsi trial PATH --set knob=value … [--patch NAME …]`: run one candidate for real and show
what it measured. Exit 0 when the trial is ok, 1 when it ended in any other status, 2 when it
could not be set up (bad contract, unknown knob, bad value)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from infrarsi.byte_units import GIB
from infrarsi.cli.console import add_sandbox_flag, console, emit_json, err
from infrarsi.contract import Contract, KnobValue
from infrarsi.events import Event
from infrarsi.patches.numerics import numerics_by_design
from infrarsi.project import PreparedRepo
from infrarsi.records.doctor import DoctorError
from infrarsi.runner.sandbox import bwrap_problem
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialResult

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trial", help="run one candidate (knob values + patches) as a real trial",
                       description=__doc__)
    p.add_argument("path", type=Path, help="the repository (with .infrarsi/contract.toml)")
    p.add_argument("--set", dest="knobs", action="append", default=[], metavar="KNOB=VALUE",
                   help="a knob value, parsed by the knob's type (repeatable)")
    p.add_argument("--patch", dest="patches", action="append", default=[], metavar="NAME",
                   help="a patch to apply (repeatable)")
    p.add_argument("--budget-gib", type=float, help="memory budget in GiB (default: the contract's)")
    p.add_argument("--steps", type=int, help="steps to run (default: warm-up + measured)")
    p.add_argument("--timeout", type=float, help="seconds before the run is stopped")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_sandbox_flag(p)
    p.set_defaults(func=run)


class UsageError(ValueError):
    pass


def parse_value(contract: Contract, assignment: str) -> tuple[str, KnobValue]:
    name, sep, text = assignment.partition("=")
    if not sep:
        raise UsageError(f"--set {assignment!r}: expected KNOB=VALUE")
    try:
        knob = contract.knob(name)
    except KeyError:
        known = ", ".join(k.name for k in contract.knobs) or "none"
        raise UsageError(f"--set {assignment!r}: the contract has no knob {name!r} (knobs: {known})") from None
    try:
        if knob.type == "bool":
            if text.lower() not in _TRUE | _FALSE:
                raise ValueError(f"expected one of {sorted(_TRUE | _FALSE)}")
            return name, text.lower() in _TRUE
        if knob.type == "int":
            return name, int(text)
        if knob.type == "float":
            return name, float(text)
        return name, text
    except ValueError as error:
        raise UsageError(f"--set {assignment!r}: knob {name!r} is a {knob.type}: {error}") from None


def run(args: argparse.Namespace) -> int:
    try:
        spec = _spec(args)
    except (ValueError, DoctorError) as error:  # ContractError, UsageError, TrialSpec's own checks, doctor.json
        err(str(error))
        return 2
    problem = bwrap_problem() if spec.sandbox else None
    if problem:
        err(problem)
        return 2
    if args.json:
        result = run_trial(spec)
        emit_json(result.to_dict())
    else:
        result = _run_with_progress(spec)
        console.print(summary(result))
    return 0 if result.ok else 1


def _spec(args: argparse.Namespace) -> TrialSpec:
    repo = args.path.resolve()  # `infrarsi trial .`: the trial runs elsewhere
    prepared = PreparedRepo.open(repo)
    contract, doctor = prepared.contract, prepared.doctor
    candidate = Candidate(knobs=dict(parse_value(contract, a) for a in args.knobs), patches=tuple(args.patches))
    budget = int(args.budget_gib * GIB) if args.budget_gib is not None else None
    # Held to doctor's parameters as the run's trials are, when doctor measured this contract.
    doctor = doctor if doctor is not None and doctor.contract_hash == contract.digest() else None
    return TrialSpec(repo=repo, contract=contract, candidate=candidate, steps=args.steps,
                     timeout_s=args.timeout, budget_bytes=budget, sandbox=args.sandbox,
                     numerics_by_design=numerics_by_design(candidate),
                     reference_checksums=doctor.checksums if doctor else {},
                     reassociation_drift=doctor.reassociation_drift if doctor else {})


def _run_with_progress(spec: TrialSpec) -> TrialResult:
    columns = (TextColumn("[bold]trial[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("starting…", total=spec.total_steps)

        def on_event(event: Event) -> None:
            if event.kind == "report":
                progress.update(task, completed=event.done, description=event.message)

        spec.on_event = on_event
        return run_trial(spec)


def summary(result: TrialResult) -> Panel:
    style = "green" if result.ok else "red"
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("candidate", result.candidate.key()),
        ("step time", f"{result.step_time:.4f} s (median of {len(result.step_times)})" if result.step_time else "—"),
        ("steps run", str(len(result.losses))),
        ("tokens/step", str(result.tokens_per_step) if result.tokens_per_step is not None else "—"),
        ("peak memory", f"{result.peak_bytes / GIB:.2f} GiB" if result.peak_bytes else "—"),
        ("start-up", f"{result.startup_s:.2f} s" if result.startup_s is not None else "—"),
        ("cost", f"{result.wall_s:.1f} s"),
        ("changed", ", ".join(sorted({h.path for h in result.hunks})) or "nothing in the source"),
        ("log", result.log_path),
    ]
    for name, value in rows:
        table.add_row(name, value)
    if result.detail:
        table.add_row("detail", result.detail)
    return Panel(table, title=f"[{style}]{result.status.value}[/]", title_align="left", border_style=style)
