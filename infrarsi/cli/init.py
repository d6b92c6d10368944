"""`infrarsi init PATH [--scope …] [--budget-gib X] [--entry FILE] [--insert-probe] [--json] [-- command…]`:
write the task contract. After ``--``, the command the owner runs (``python train.py config/small.py
--device=cpu``); it runs from the current directory when that is inside PATH (else PATH, or --cwd)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from infrarsi.byte_units import GIB
from infrarsi.cli.console import console, emit_json, err
from infrarsi.cli.fit import print_diff
from infrarsi.contract import KnobValue
from infrarsi.knobs.pair import describe as describe_pair
from infrarsi.stages.init import MEASURED_STEPS, WARMUP_STEPS, InitResult, init


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "init",
        help="find the entry point and its knobs, lock the scope, write .infrarsi/contract.toml",
        description="Reads the training repo with libcst (nothing is imported or run), classifies its knobs, "
        "locks the editable scope and hashes every other Python source, and writes .infrarsi/contract.toml. "
        "The user's files are not changed, unless --insert-probe is given. "
        "Give the command you train with after --, e.g. `infrarsi init . -- python train.py config/small.py "
        "--device=cpu`: it is stored in the contract and its arguments are the baseline.",
    )
    p.add_argument("path", nargs="?", default=".", type=Path, help="the repository (default: .)")
    p.add_argument(
        "--scope",
        type=_csv,
        metavar="A.py,B.py",
        help="editable files (path or path::function); +path widens the default scope, -path narrows it",
    )
    p.add_argument("--budget-gib", type=_positive_float, metavar="X",
                   help="memory budget in GiB (default: the README's budget_mib line, else 80%% of RAM / the card)")
    p.add_argument("--entry", metavar="FILE", help="the training script, when init cannot pick it")
    p.add_argument("--cwd", type=Path, metavar="DIR",
                   help="where the command after -- runs (default: the current directory when it is inside "
                        "PATH, else PATH)")
    p.add_argument("--launcher", choices=("python", "torchrun"), help="override the detected launcher")
    p.add_argument("--warmup-steps", type=int, default=WARMUP_STEPS, metavar="N")
    p.add_argument("--measured-steps", type=int, default=MEASURED_STEPS, metavar="N")
    p.add_argument("--planned-steps", type=int, metavar="N",
                   help="steps the real job runs (default: the step knob's default)")
    p.add_argument("--insert-probe", action="store_true",
                   help="write the probe codemod into the training loop (init otherwise only shows its diff)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def command_cwd(path: Path, cwd: Path | None) -> Path:
    """Where the owner's command runs: --cwd, else the current directory when it is inside the repo."""
    if cwd is not None:
        return cwd.resolve()
    here = Path.cwd().resolve()
    return here if here.is_relative_to(path.resolve()) else path.resolve()


def run(args: argparse.Namespace) -> int:
    command = getattr(args, "workload_command", None)
    result = init(
        args.path,
        command=command,
        cwd=command_cwd(args.path, args.cwd) if command is not None else None,
        scope=args.scope,
        budget_bytes=int(args.budget_gib * GIB) if args.budget_gib else None,
        entry=args.entry,
        launcher=args.launcher,
        insert_probe=args.insert_probe,
        warmup_steps=args.warmup_steps,
        measured_steps=args.measured_steps,
        planned_steps=args.planned_steps,
    )
    if args.json:
        emit_json(result.to_dict())
        return 0 if result.ok else 2
    if not result.ok:
        err(result.message)
        return 2
    render(result)
    return 0


def _value(value: KnobValue) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def render(result: InitResult) -> None:
    contract = result.contract
    assert contract is not None  # rendered only when ok, which comes with the contract
    w = contract.workload
    console.print(f"[bold]init[/] {result.entry}  [dim]{w.knob_style} knobs, launched with {w.launcher}[/]")
    console.print(f"entry: {result.entry} ({result.entry_why})")
    console.print(f"loop: {result.loop_why}")
    if w.command_from == "user":
        where = "" if w.cwd in ("", ".") else f" (in {w.cwd})"
        env = "".join(f"{k}={v} " for k, v in w.env.items())
        console.print(f"command{where}: {env}{' '.join(w.command)}")
    table = Table(box=None, pad_edge=False)
    for column in ("knob", "role", "default", "domain", "tunable", "source"):
        table.add_column(column)
    for k in sorted(contract.knobs, key=lambda k: (not k.tunable, k.role, k.name)):
        domain = ", ".join(_value(v) for v in k.domain) if k.tunable else "[dim]fixed[/]"
        table.add_row(k.name, k.role, _value(k.default), domain, "[green]yes[/]" if k.tunable else "no", k.source)
    console.print(table)
    tokens = f"{w.tokens_per_step:,}" if w.tokens_per_step else "[yellow]unknown (doctor measures it)[/]"
    console.print(
        f"workload: {tokens} tokens/step = {w.global_batch or '?'} sequences × {w.seq_len or '?'} tokens; "
        f"seed {w.seed}; {w.warmup_steps} warm-up + {w.measured_steps} measured steps per trial, "
        f"{w.planned_steps} in the real job ({w.planned_from or 'as written'})"
        + (" until doctor counts the steps an epoch" if w.epochs else "")
    )
    if result.pair is not None:
        for line in describe_pair(result.pair, w.seq_len):
            console.print(line, markup=False)
    console.print(f"memory budget: {contract.memory.budget_bytes / GIB:.2f} GiB ({contract.memory.device})")
    console.print(f"editable: {', '.join(result.editable)}" + (
        f"  [dim](functions: {', '.join(contract.scope.functions)})[/]" if contract.scope.functions else ""))
    console.print(f"locked (hashed): {', '.join(result.locked) or '[dim]none[/]'}")
    if result.unknown:
        console.print(f"unknown knobs, kept at their defaults: {', '.join(result.unknown)}")
    for k in contract.knobs:
        if k.patch:
            console.print(f"knob [bold]{k.name}[/] added by the {k.patch} patch: {k.default} is the script as written, "
                          f"the search tries {', '.join(str(v) for v in k.domain if v != k.default)}")
    for claim in result.claims:
        if claim["status"] == "unconfirmed":
            console.print(f"the model claims [bold]{claim['name']}[/] is {claim['role']} ({claim['evidence']}): "
                          "locked until doctor's trial agrees")
    for s in result.skipped:
        console.print(f"[dim]not a knob: {s['name']} ({s['source']}): {s['reason']}[/]")
    if result.probe_diff and not result.probe_inserted:
        console.print("[bold]No probe[/] (optional: the launcher measures steps). To name phases, this diff adds "
                      "it (rerun with --insert-probe to write it):")
        print_diff(console, result.probe_diff)
    elif result.probe_inserted and result.probe_diff is not None:  # the diff it inserted
        console.print("[bold]Inserted the probe:[/]")
        print_diff(console, result.probe_diff)
    for note in result.notes:
        console.print(f"[bold yellow]baseline changed:[/] {note}")
    for warning in result.warnings:
        if warning not in result.notes:
            console.print(f"[yellow]warning:[/] {warning}")
    console.print(f"[dim]wrote {result.contract_path}[/]")
