"""The command line of one trial: the contract's command, its fixed arguments and the knob flags.

Knobs without a ``flag`` cannot be passed on the command line; :func:`source_knobs` picks them
out so the workspace writes them into the source instead.
"""

from __future__ import annotations

import sys

from infrarsi.commandline import is_python, parse_command, without_flag
from infrarsi.contract import Contract, Knob, KnobValue
from infrarsi.knobs.literals import written_in_code
from infrarsi.trials import Candidate

# Launcher knobs belong before the entry script (torchrun's own options), not after it.
LAUNCHER_ROLES = ("nproc_per_node",)


def resolve_launcher(head: list[str], python: str = sys.executable) -> list[str]:
    """Run ``python``, ``torchrun`` and ``accelerate launch`` with InfraRSI's interpreter, whatever is
    first on PATH (an explicit path to an interpreter is kept). ``head`` is the command up to the script."""
    program, rest = head[0], list(head[1:])
    if is_python(program) and "/" not in program:
        return [python, *rest]
    if program == "torchrun":
        return [python, "-m", "torch.distributed.run", *rest]
    if program == "accelerate" and rest[:1] == ["launch"]:
        return [python, "-m", "accelerate.commands.launch", *rest[1:]]
    return [program, *rest]


def step_knob(contract: Contract) -> Knob | None:
    knobs = contract.by_role("steps")
    return knobs[0] if knobs else None


def patches_to_apply(contract: Contract, candidate: Candidate) -> tuple[str, ...]:
    """The candidate's patches, and those that add a knob it sets away from its default (``Knob.patch``)."""
    implied = [k.patch for k in contract.knobs
               if k.patch and k.name in candidate.knobs and candidate.knobs[k.name] != k.default]
    return tuple(dict.fromkeys([*candidate.patches, *implied]))


def job_steps(contract: Contract) -> int:
    """The step count every trial of this contract passes to the job's step knob, whatever the
    run's own length: the owner's planned length (or the contract's, when longer). InfraRSI stops
    each run after its own steps (infrarsi/launcher/control.py); a job told its run's length could
    spend time only in the runs that end early, and its schedules are the owner's this way."""
    w = contract.workload
    return max(w.planned_steps, w.total_steps, max(1, w.warmup_steps) + 1)


def trial_knob_values(contract: Contract, knobs: dict[str, KnobValue], steps: int) -> dict[str, KnobValue]:
    """Every knob value the trial sets: the candidate's, then the step count (which wins). A knob a
    patch adds is left out at its default: the script runs without the patch and has no such knob."""
    added = {k.name: k.default for k in contract.knobs if k.patch}
    values = {**contract.workload.overrides,
              **{n: v for n, v in knobs.items() if n not in added or v != added[n]}}
    steps_knob = step_knob(contract)
    if steps_knob is not None:
        values[steps_knob.name] = steps
    return values


def source_knobs(contract: Contract, values: dict[str, KnobValue]) -> dict[str, dict[str, KnobValue]]:
    """Flag-less knob values grouped by the file that defines them (``Knob.source`` or the entry).
    A setting written in code is left as written at its default, which may stand for torch's
    default where the code leaves it out (knobs/literals.py)."""
    by_file: dict[str, dict[str, KnobValue]] = {}
    for name, value in values.items():
        knob = contract.knob(name)
        if not knob.flag and not (value == knob.default and written_in_code(name)):
            path = knob.source_path or contract.workload.entry
            by_file.setdefault(path, {})[name] = value
    return by_file


def build_argv(contract: Contract, values: dict[str, KnobValue], python: str = sys.executable,
               *, as_written: bool = False) -> list[str]:
    """argv for the workload with ``values`` (from :func:`trial_knob_values`) rendered as flags.

    A knob's setting replaces the command's own setting of that flag, where it stood; otherwise it
    is appended. Launcher knobs (torchrun's ``--nproc_per_node``) go before the script.
    ``as_written`` keeps the launcher (``python``, ``torchrun``) as the user wrote it, for a
    command line a person runs (the report's reproduce command) rather than a trial."""
    workload = contract.workload
    command = parse_command(list(workload.command))
    head, target, tail = command.head, command.target_text, command.script_args
    if not as_written:
        head = resolve_launcher(head, python)
    flagged = [contract.knob(name) for name in values
               if contract.knob(name).flag and contract.knob(name).flag_style != "env"]
    for knob in (k for k in flagged if k.role in LAUNCHER_ROLES):
        head = _set(head, {knob.flag}, True, knob.render(values[knob.name]))
    script = [k for k in flagged if k.role not in LAUNCHER_ROLES]
    set_flags = {k.flag for k in script}
    paths = {k.flag for k in contract.knobs if k.flag and k.flag_style != "env" and not k.flag.startswith("-")}
    for name, value in workload.args.items():
        flag = name if name in paths else f"--{name}"  # a Hydra override is its path, with no dashes
        if flag not in set_flags:
            tail = _set(tail, {flag}, True, [f"{flag}={value}"])
    for knob in script:
        tail = _set(tail, _spellings(knob), knob.flag_style == "eq", knob.render(values[knob.name]))
    return [*head, target, *tail]


def _spellings(knob: Knob) -> set[str]:
    if knob.flag_style == "bool_optional":
        return {knob.flag, "--no-" + knob.flag.removeprefix("--")}
    return {knob.flag}


def _set(args: list[str], flags: set[str], takes_value: bool, rendered: list[str]) -> list[str]:
    """``args`` with its settings of ``flags`` replaced by ``rendered`` (appended when it had none)."""
    rest, at = without_flag(args, flags, takes_value)
    at = len(rest) if at is None else at
    return [*rest[:at], *rendered, *rest[at:]]


def local_ranks(contract: Contract, argv: list[str]) -> int | None:
    """Processes that will step here: 1, torchrun's ``--nproc_per_node``, or None when torchrun
    picks it (``auto``, ``gpu``…) or ``accelerate launch`` does (its config file may say several).
    Step records from more processes than this are no steps of the run (infrarsi/launcher/streams.py)."""
    if contract.workload.launcher == "accelerate":
        return None
    if contract.workload.launcher != "torchrun":
        return 1
    launcher = parse_command(argv).head
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
