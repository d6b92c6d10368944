"""The owner's command as the knobs' baseline: a knob's default is the value the command gives it.

Read in the command's order, as the script would: ``--name value`` / ``--name=value`` for declared
flags; positional Python config files for configurator scripts (nanoGPT's ``config/small.py``,
whose assignments override the globals); YAML / JSON files named by an option or a positional
(``--config x.yaml``). A flag the script does not declare (a library parser's, such as Hugging
Face's ``TrainingArguments``) becomes a knob of its own, typed from its value; a config-file key no
flag sets becomes a knob written into the trial's copy of that file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from pathlib import Path

from infrarsi.commandline import Arg, Command, script_settings
from infrarsi.contract import KnobValue
from infrarsi.knobs.config_files import DATA_SUFFIXES, read_data_config, read_python_config
from infrarsi.knobs.discover import Discovery
from infrarsi.knobs.raw import RawKnob
from infrarsi.knobs.source import DiscoveryError, is_knob_value, type_name

# Declared knobs the command may supply although their declaration gives no usable default.
_REVIVABLE = ("no default", "default is None", "default is computed at run time",
              "default is not a bool, int, float or str literal")


@dataclass(slots=True)
class CommandValues:
    knobs: list[RawKnob]
    skipped: list[RawKnob]
    set_by: dict[str, str] = field(default_factory=dict)
    """Knob name -> what set its baseline (``the command``, ``config/small.py:3``)."""
    config_files: list[str] = field(default_factory=list)
    """Repo-relative config files the command names."""


def _norm(flag: str) -> str:
    return flag.replace("_", "-")


def apply_command(repo: Path, cwd: str, found: Discovery, command: Command) -> CommandValues:
    """``found``'s knobs with the command's values as their defaults, plus the command's own knobs."""
    knobs = {k.name: k for k in found.knobs}
    skipped = {k.name: k for k in found.skipped}
    by_flag: dict[str, str] = {}
    bare: set[str] = set()
    for k in [*found.knobs, *found.skipped]:
        if k.flag:
            by_flag[_norm(k.flag)] = k.name
            if k.flag_style in ("store_true", "store_false", "bool_optional"):
                bare.add(k.flag)
            if k.flag_style == "bool_optional":
                no = "--no-" + k.flag.removeprefix("--")
                by_flag[_norm(no)] = k.name
                bare.add(no)
    out = CommandValues(knobs=[], skipped=[])
    order: list[str] = list(knobs)
    flagged_in_command: set[str] = set()
    settings = script_settings(command.script_args, bare)
    for arg in settings:
        if arg.flag and _norm(arg.flag) in by_flag:
            flagged_in_command.add(by_flag[_norm(arg.flag)])
    for arg in settings:
        if arg.value and arg.value.lower().endswith(DATA_SUFFIXES):
            _data_config(repo, cwd, arg.value, knobs, flagged_in_command, order, out)
        if not arg.flag:
            if arg.value and arg.value.lower().endswith(".py") and found.style == "globals":
                _python_config(repo, cwd, arg.value, knobs, out)
            continue
        name = by_flag.get(_norm(arg.flag))
        if name is None:
            knob = _command_knob(arg)
            skipped.pop(knob.name, None)
            if knob.name not in knobs:
                order.append(knob.name)
            knobs[knob.name] = knob
            out.set_by[knob.name] = "the command"
            continue
        declared = knobs.get(name) or skipped.get(name)
        assert declared is not None  # by_flag names found knobs only, each kept in one of the two
        if name in skipped and skipped[name].note not in _REVIVABLE:
            continue
        value = _value_for(declared, arg, found.style)
        knobs[name] = replace(declared, default=value, type=declared.type or type_name(value), note="")
        skipped.pop(name, None)
        if name not in order:
            order.append(name)
        out.set_by[name] = "the command"
    out.knobs = [knobs[n] for n in order]
    out.skipped = list(skipped.values())
    return out


def _resolve(repo: Path, cwd: str, text: str) -> tuple[Path, str]:
    """(absolute path, repo-relative path) of a file the command names, relative to its cwd."""
    path = (repo / cwd / text).resolve()
    try:
        rel = path.relative_to(repo.resolve()).as_posix()
    except ValueError:
        raise DiscoveryError(f"config file {text} (from the command) is outside the repository {repo}") from None
    if not path.is_file():
        raise DiscoveryError(f"config file {text} (from the command) does not exist in {repo / cwd}")
    return path, rel


def _python_config(repo: Path, cwd: str, text: str, knobs: dict[str, RawKnob], out: CommandValues) -> None:
    path, rel = _resolve(repo, cwd, text)
    out.config_files.append(rel)
    for name, (value, line) in read_python_config(path, rel).items():
        if name in knobs:
            knobs[name] = replace(knobs[name], default=value, type=knobs[name].type or type_name(value))
            out.set_by[name] = f"{rel}:{line}"


def _data_config(repo: Path, cwd: str, text: str, knobs: dict[str, RawKnob], flagged: set[str],
                 order: list[str], out: CommandValues) -> None:
    path, rel = _resolve(repo, cwd, text)
    out.config_files.append(rel)
    for key, value in read_data_config(path, rel).items():
        name = key.replace("-", "_")
        declared = knobs.get(name)
        if declared is not None and name in flagged:
            knobs[name] = replace(declared, default=value)
        else:
            # The file's value reaches the script however it merges its config: trials rewrite the file.
            base = declared or RawKnob(name, type_name(value), value)
            knobs[name] = replace(base, default=value, type=type_name(value), flag="", flag_style="eq",
                                  source=f"{rel}:{key}")
            if name not in order:
                order.append(name)
        out.set_by[name] = rel


def _command_knob(arg: Arg) -> RawKnob:
    """A flag the script does not declare (a library's parser reads it), typed from its value."""
    name = arg.flag.lstrip("-+").replace("-", "_")
    if arg.value is None:
        return RawKnob(name, "bool", True, flag=arg.flag, flag_style="store_true", source="command")
    value = _literal(arg.value)
    return RawKnob(name, type_name(value), value, flag=arg.flag, source="command")


def _literal(text: str) -> KnobValue:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    return value if is_knob_value(value) else text


def _value_for(knob: RawKnob, arg: Arg, style: str) -> KnobValue:
    """The command's value for ``knob``, as the script will parse it."""
    where = f" ({knob.source} declares it)" if knob.source else ""
    if knob.flag_style in ("store_true", "store_false", "bool_optional"):
        if arg.value is not None:
            raise DiscoveryError(f"the command gives {arg.flag} the value {arg.value!r}, but it takes none{where}")
        if knob.flag_style == "bool_optional":
            return not _norm(arg.flag).startswith("--no-")
        return knob.flag_style == "store_true"
    if arg.value is None:
        raise DiscoveryError(f"the command gives {arg.flag} no value{where}")
    if style == "globals":
        value = _literal(arg.value)  # the configurator reads values with literal_eval, else as a string
    else:
        value = _typed(knob, arg, arg.value)
    if knob.choices and value not in knob.choices:
        raise DiscoveryError(f"the command sets {arg.flag} to {arg.value!r}, not one of its choices "
                             f"{list(knob.choices)}{where}")
    return value


def _typed(knob: RawKnob, arg: Arg, text: str) -> KnobValue:
    kind = knob.type or "str"
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
    except ValueError:
        where = f" ({knob.source} declares it)" if knob.source else ""
        raise DiscoveryError(f"the command sets {arg.flag} to {text!r}, which is not an {kind}{where}") from None
    if kind == "bool":
        lowered = text.lower()
        if lowered in ("true", "1", "yes", "y", "t"):
            return True
        if lowered in ("false", "0", "no", "n", "f"):
            return False
        raise DiscoveryError(f"the command sets {arg.flag} to {text!r}, which is not a boolean")
    return text
