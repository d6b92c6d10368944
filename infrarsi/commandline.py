"""The launch command as the owner types it: environment prefix, launcher, script or module, arguments.

``infrarsi init PATH -- <command…>`` stores this command in the contract; init reads the knobs'
baseline values from its arguments and the runner rebuilds each trial's argv from it. Only the
shape of the command is read here (nothing runs); whether the script exists is init's question.

Launchers: ``python [opts] script.py …`` or ``python -m pkg.mod …`` (any ``python3.X`` or path to
one), ``torchrun [opts] script.py …`` (also ``python -m torch.distributed.run``), and
``accelerate launch [opts] script.py …``.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import PurePath

from infrarsi.contract import LAUNCHERS

_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
# Interpreter options that take a value in the next token (`python -X dev`, `-W ignore`).
_PYTHON_VALUE_OPTS = {"-X", "-W", "--check-hash-based-pycs"}
# Launcher options that take no value; every other option takes the next token (or has `=`).
_TORCHRUN_FLAGS = {"--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "-m", "--module",
                   "--module_name"}
_ACCELERATE_FLAGS = {"--cpu", "--multi_gpu", "--tpu", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm",
                     "--use_xpu", "-m", "--module", "--no_python", "--debug", "-q", "--quiet", "--same_network"}


class CommandError(ValueError):
    """The command cannot be read as a training launch; the message says what and where."""


@dataclass(frozen=True, slots=True)
class Command:
    argv: list[str]
    """The command without its environment prefix."""
    env: dict[str, str] = field(default_factory=dict)
    """``K=V`` tokens before the program (and after an ``env`` program)."""
    launcher: str = "python"
    """python | torchrun | accelerate."""
    target: int = 1
    """Index in ``argv`` of the script path or, for ``-m``, of the module name."""
    module: bool = False
    """Whether ``argv[target]`` is a module name (``-m``), not a path."""

    @property
    def target_text(self) -> str:
        return self.argv[self.target]

    @property
    def head(self) -> list[str]:
        """Launcher and its options, up to the script (or ``-m`` module) exclusive."""
        return self.argv[: self.target]

    @property
    def script_args(self) -> list[str]:
        """What the script itself receives."""
        return self.argv[self.target + 1:]


def split_env(tokens: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading ``K=V`` assignments (optionally after ``env``) and the rest."""
    env: dict[str, str] = {}
    rest = list(tokens)
    if rest and rest[0] == "env":
        rest = rest[1:]
    while rest and _ENV.match(rest[0]):
        key, _, value = rest.pop(0).partition("=")
        env[key] = value
    return env, rest


def is_python(program: str) -> bool:
    return _PYTHON.match(PurePath(program).name) is not None


def parse_command(tokens: list[str]) -> Command:
    """Read ``tokens`` (what followed ``--``); raises CommandError naming what is wrong."""
    if not tokens:
        raise CommandError("nothing after --: give the command that runs your training, "
                           "e.g. `infrarsi init . -- python train.py --batch_size 8`")
    env, argv = split_env(tokens)
    if not argv:
        raise CommandError(f"the command {' '.join(tokens)!r} sets environment variables but runs no program")
    program = argv[0]
    if is_python(program):
        return _python(argv, env)
    name = PurePath(program).name
    if name not in LAUNCHERS:
        raise CommandError(
            f"the command starts with {program!r}: InfraRSI runs training launched with python, torchrun or "
            "`accelerate launch` (put a wrapper script's python command after --)"
        )
    if name == "torchrun":
        return _launcher(argv, env, "torchrun", 1, _TORCHRUN_FLAGS)
    if len(argv) < 2 or argv[1] != "launch":
        raise CommandError(f"`{' '.join(argv[:2])}`: InfraRSI runs `accelerate launch [options] script.py …`")
    return _launcher(argv, env, "accelerate", 2, _ACCELERATE_FLAGS)


def _python(argv: list[str], env: dict[str, str]) -> Command:
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            if i + 1 >= len(argv):
                raise CommandError(f"`{' '.join(argv)}`: -m names no module")
            if argv[i + 1] == "torch.distributed.run":
                return _launcher(argv, env, "torchrun", i + 2, _TORCHRUN_FLAGS)
            return Command(argv=argv, env=env, launcher="python", target=i + 1, module=True)
        if arg == "-c":
            raise CommandError(f"`{' '.join(argv)}`: python -c runs no file; give the training script or -m module")
        if arg in _PYTHON_VALUE_OPTS:
            i += 2
            continue
        if arg.startswith("-") and arg != "-":
            i += 1
            continue
        return Command(argv=argv, env=env, launcher="python", target=i)
    raise CommandError(f"`{' '.join(argv)}` names no script: give the training script after python")


def _launcher(argv: list[str], env: dict[str, str], launcher: str, start: int, flags: set[str]) -> Command:
    i = start
    module = False
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            return Command(argv=argv, env=env, launcher=launcher, target=i, module=module)
        if arg in ("-m", "--module"):
            module = True
        if "=" in arg or arg in flags:
            i += 1
        else:
            i += 2
    raise CommandError(f"`{' '.join(argv)}` names no script: give the training script after {launcher}'s options")


@dataclass(frozen=True, slots=True)
class Arg:
    """One setting on the script's command line."""

    flag: str
    """``--name`` as written (empty for a positional)."""
    value: str | None
    """The value (None: a bare flag)."""
    start: int
    """Index of its first token in the script arguments."""
    tokens: int
    """How many tokens it spans (1 for ``--k=v`` or a bare flag, 2 for ``--k v``)."""


OVERRIDE = re.compile(r"\+{0,2}[A-Za-z_]\w*(\.\w+)*=")
"""A ``key.sub=value`` override (Hydra, OmegaConf's ``from_cli``): a setting with no dashes; Hydra's
``+key=`` / ``++key=`` add or force one."""


def script_settings(args: list[str], bare: Container[str] = frozenset()) -> list[Arg]:
    """The script arguments as flags with values and positionals.

    ``bare``: flags known to take no value (store_true and the like); any other ``--flag`` takes
    the next token as its value unless that token is itself an option. A ``key.sub=value`` override
    is a setting whose flag is ``key.sub`` (as written, pluses included)."""
    out: list[Arg] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-") and not _is_number(arg) and arg not in ("-", "--"):
            if "=" in arg:
                flag, _, value = arg.partition("=")
                out.append(Arg(flag, value, i, 1))
                i += 1
            elif arg in bare or i + 1 >= len(args) or (args[i + 1].startswith("-") and not _is_number(args[i + 1])):
                out.append(Arg(arg, None, i, 1))
                i += 1
            else:
                out.append(Arg(arg, args[i + 1], i, 2))
                i += 2
        elif OVERRIDE.match(arg):
            flag, _, value = arg.partition("=")
            out.append(Arg(flag, value, i, 1))
            i += 1
        else:
            out.append(Arg("", arg, i, 1))
            i += 1
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def without_flag(args: list[str], flags: set[str], takes_value: bool) -> tuple[list[str], int | None]:
    """``args`` without any setting of ``flags`` (``--f=v``, ``--f v``, bare ``--f``), and where
    the first one stood (None when absent). Spellings with ``-`` and ``_`` count as one flag."""
    names = {_norm(f) for f in flags}
    out: list[str] = []
    first: int | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        flag = arg.partition("=")[0]
        if (arg.startswith("-") or OVERRIDE.match(arg)) and _norm(flag) in names:
            first = len(out) if first is None else first
            has_value = "=" in arg
            i += 1
            if takes_value and not has_value and i < len(args) and (
                    not args[i].startswith("-") or _is_number(args[i])):
                i += 1
            continue
        out.append(arg)
        i += 1
    return out, first


def _norm(flag: str) -> str:
    return flag.replace("_", "-")
