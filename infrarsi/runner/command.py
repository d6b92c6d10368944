"""The command line of one trial: the contract's command, its fixed arguments and the knob flags.

Knobs without a ``flag`` cannot be passed on the command line; :func:`source_knobs` picks them
out so the workspace writes them into the source instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

from infrarsi.contract import Contract, Knob, KnobValue

# Launcher knobs belong before the entry script (torchrun's own options), not after it.
LAUNCHER_ROLES = ("nproc_per_node",)


def resolve_launcher(command: list[str], python: str = sys.executable) -> list[str]:
    """Run ``python`` and ``torchrun`` with InfraRSI's interpreter, whatever is first on PATH."""
    head, rest = command[0], list(command[1:])
    if head in ("python", "python3"):
        return [python, *rest]
    if head == "torchrun":
        return [python, "-m", "torch.distributed.run", *rest]
    return [head, *rest]


def step_knob(contract: Contract) -> Knob | None:
    knobs = contract.by_role("steps")
    return knobs[0] if knobs else None


def trial_knob_values(contract: Contract, knobs: dict[str, KnobValue], steps: int) -> dict[str, KnobValue]:
    """Every knob value the trial sets: the candidate's, then the step count (which wins)."""
    values = dict(knobs)
    steps_knob = step_knob(contract)
    if steps_knob is not None:
        values[steps_knob.name] = steps
    return values


def source_knobs(contract: Contract, values: dict[str, KnobValue]) -> dict[str, dict[str, KnobValue]]:
    """Flag-less knob values grouped by the file that defines them (``Knob.source`` or the entry)."""
    by_file: dict[str, dict[str, KnobValue]] = {}
    for name, value in values.items():
        knob = contract.knob(name)
        if not knob.flag:
            path = knob.source.rsplit(":", 1)[0] if knob.source else contract.workload.entry
            by_file.setdefault(path, {})[name] = value
    return by_file


def build_argv(contract: Contract, values: dict[str, KnobValue], python: str = sys.executable,
               *, as_written: bool = False) -> list[str]:
    """argv for the workload with ``values`` (from :func:`trial_knob_values`) rendered as flags.

    ``as_written`` keeps the contract's launcher (``python``, ``torchrun``) as the user wrote it,
    for a command line a person runs (the report's reproduce command) rather than a trial."""
    workload = contract.workload
    command = list(workload.command) if as_written else resolve_launcher(workload.command, python)
    flagged = [contract.knob(name) for name in values if contract.knob(name).flag]
    launcher = [k for k in flagged if k.role in LAUNCHER_ROLES]
    script = [k for k in flagged if k.role not in LAUNCHER_ROLES]

    entry = _entry_index(command, workload.entry, offset=len(command) - len(workload.command) + 1)
    head, tail = command[:entry], command[entry:]
    for knob in launcher:
        head = _without_flag(head, knob.flag) + knob.render(values[knob.name])

    set_flags = {k.flag for k in script}
    fixed = [f"--{k}={v}" for k, v in workload.args.items() if f"--{k}" not in set_flags]
    rendered = [arg for k in script for arg in k.render(values[k.name])]
    return [*head, *tail, *fixed, *rendered]


def local_ranks(contract: Contract, argv: list[str]) -> int | None:
    """Processes that will write probe files here: 1, torchrun's ``--nproc_per_node``, or None
    when torchrun picks it (``auto``, ``gpu``…)."""
    if contract.workload.launcher != "torchrun":
        return 1
    entry = _entry_index(argv, contract.workload.entry, offset=1)
    launcher = argv[:entry]
    for i, arg in enumerate(launcher):
        for flag in ("--nproc_per_node", "--nproc-per-node"):
            if arg.startswith(flag + "="):
                value = arg.split("=", 1)[1]
            elif arg == flag and i + 1 < len(launcher):
                value = launcher[i + 1]
            else:
                continue
            return int(value) if value.isdigit() else None
    return 1


def _entry_index(command: list[str], entry: str, offset: int) -> int:
    """Where the entry script sits in argv; launcher flags go before it."""
    for i in range(offset, len(command)):
        if Path(command[i]) == Path(entry):
            return i
    return offset


def _without_flag(args: list[str], flag: str) -> list[str]:
    """``args`` without an earlier setting of ``flag`` (``--f=v`` or ``--f v``)."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == flag:
            skip = True
        elif not arg.startswith(flag + "="):
            out.append(arg)
    return out
