"""Reading the knobs an entry point exposes, in the styles training scripts use.

- argparse: ``parser.add_argument("--name", type=…, default=…, choices=…, help=…)`` (and
  ``parser.set_defaults``), in the entry point and the repo modules it imports;
- globals: nanoGPT-style module globals before ``exec(open("configurator.py").read())`` (or an
  inline loop over ``sys.argv`` that writes ``globals()``), overridden with ``--name=value``;
- dataclass: fields of ``@dataclass`` configs the entry point instantiates or hands to a parser
  (tyro, HfArgumentParser pass them as flags; otherwise their defaults are rewritten in source);
- click, typer, fire: the parameters of the command function the library calls
  (``infrarsi.knobs.cli_libraries``);
- nested: the leaves of a config node merged with ``--trainer.num_workers=2`` overrides, of the
  Hydra config ``@hydra.main`` composes (its config groups included) or of an ml_collections
  ``ConfigDict`` behind an absl ``config_flags`` flag (``infrarsi.knobs.nested``).

A knob the search cannot pass (no default, a default computed at run time, an ``append``
action…) is returned in ``skipped`` with the reason, never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeGuard

import libcst as cst

from infrarsi.knobs.cli_libraries import read_cli_library
from infrarsi.knobs.entry import EntryPoint
from infrarsi.knobs.nested import nested_config
from infrarsi.knobs.raw import TYPES, RawKnob
from infrarsi.knobs.source import (
    ParsedFile,
    dotted,
    is_knob_value,
    local_imports,
    parse,
    string_literal,
    type_name,
    walk,
)


@dataclass(slots=True)
class Discovery:
    style: str
    """argparse | globals | dataclass | nested | click | typer | fire (argparse when the script reads no
    knobs at all)."""
    knobs: list[RawKnob] = field(default_factory=list)
    skipped: list[RawKnob] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """The entry point and the repo modules it imports, transitively."""
    warnings: list[str] = field(default_factory=list)
    subcommand: str = ""
    """The command of a click group or fire dict that trials run: the command line names it before the flags."""


# ---------------------------------------------------------------- argparse


def argparse_dest(call: cst.Call) -> tuple[str, str]:
    """(dest, flag) of an ``add_argument`` call, as argparse derives them; flag empty for positionals."""
    options = [s for a in call.args if a.keyword is None and (s := string_literal(a.value)) is not None]
    kw = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    long = next((o for o in options if o.startswith("--")), None)
    flag = long or next((o for o in options if o.startswith("-")), "")
    dest = string_literal(kw.get("dest"))
    if dest is None:
        dest = flag.lstrip("-").replace("-", "_") if flag else (options[0] if options else "")
    return dest, flag


def _is_add_argument(node: cst.CSTNode) -> TypeGuard[cst.Call]:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument"


def _read_add_argument(r: ParsedFile, call: cst.Call) -> RawKnob:
    dest, flag = argparse_dest(call)
    kw = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    where = r.where(call)
    help_text = string_literal(kw.get("help")) or ""
    action_node = kw.get("action")
    action = string_literal(action_node) or dotted(action_node).rsplit(".", 1)[-1] or "store"
    if not flag:
        return RawKnob(dest, "", None, source=where, note="positional argument: the workload command must supply it")
    if action in ("store_true", "store_false", "BooleanOptionalAction"):
        style = {"store_true": "store_true", "store_false": "store_false"}.get(action, "bool_optional")
        switch = action == "store_false"
        if "default" in kw:
            ok, given = r.literal(kw["default"])
            if not ok or not isinstance(given, bool):
                return RawKnob(dest, "bool", None, flag=flag, source=where, help=help_text,
                               note="boolean flag whose default is not True/False")
            switch = given
        return RawKnob(dest, "bool", switch, help=help_text, flag=flag, flag_style=style, source=where)
    if action != "store":
        return RawKnob(dest, "", None, flag=flag, source=where, help=help_text,
                       note=f"action={action!r} takes no single value")
    if "nargs" in kw:
        return RawKnob(dest, "", None, flag=flag, source=where, help=help_text, note="nargs takes several values")
    type_node = kw.get("type")
    declared = TYPES.get(dotted(type_node), "") if type_node is not None else "str"
    if "default" not in kw:
        return RawKnob(dest, declared, None, flag=flag, source=where, help=help_text, note="no default")
    ok, default = r.literal(kw["default"])
    if not ok:
        return RawKnob(dest, declared, None, flag=flag, source=where, help=help_text,
                       note="default is computed at run time")
    if default is None:
        return RawKnob(dest, declared, None, flag=flag, source=where, help=help_text, note="default is None")
    if not is_knob_value(default):
        return RawKnob(dest, declared, None, flag=flag, source=where, help=help_text,
                       note=f"default {default!r} is not a bool, int, float or str")
    if declared == "bool":
        # argparse's type=bool turns any non-empty string, "False" included, into True.
        return RawKnob(dest, "bool", default, flag=flag, source=where, help=help_text,
                       note="type=bool parses every non-empty value as True, so it cannot be set to False")
    if declared in ("int", "float") and isinstance(default, str):
        try:
            default = int(default) if declared == "int" else float(default)
        except ValueError:
            return RawKnob(dest, declared, None, flag=flag, source=where, help=help_text,
                           note=f"default {default!r} is not a valid {declared}")
    if declared == "float" and isinstance(default, int) and not isinstance(default, bool):
        default = float(default)
    kind = declared or type_name(default)
    choices: tuple = ()
    if "choices" in kw:
        ok, value = r.literal(kw["choices"])
        if ok and isinstance(value, (list, tuple)) and all(is_knob_value(v) for v in value):
            choices = tuple(value)
    return RawKnob(dest, kind, default, choices=choices, help=help_text, flag=flag, source=where)


def _set_defaults(r: ParsedFile) -> dict[str, tuple[bool, object, str]]:
    out = {}
    for node in walk(r.module):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "set_defaults":
            for arg in node.args:
                if arg.keyword is not None:
                    ok, value = r.literal(arg.value)
                    out[arg.keyword.value] = (ok, value, r.where(arg))
    return out


def read_argparse(readers: list[ParsedFile]) -> list[RawKnob]:
    knobs: list[RawKnob] = []
    overrides: dict[str, tuple[bool, object, str]] = {}
    for r in readers:
        knobs += [_read_add_argument(r, n) for n in walk(r.module) if _is_add_argument(n)]
        overrides.update(_set_defaults(r))
    out = []
    for k in knobs:
        if k.name in overrides and not k.note:
            ok, value, where = overrides[k.name]
            if not ok or not is_knob_value(value):
                k = RawKnob(k.name, k.type, None, flag=k.flag, source=where, help=k.help,
                            note="set_defaults gives it a value computed at run time")
            else:
                k = RawKnob(k.name, k.type, value, k.choices, k.help, k.flag, k.flag_style, k.source)
        out.append(k)
    return out


# ---------------------------------------------------------------- globals (nanoGPT)


def configurator_index(module: cst.Module) -> int | None:
    """Index of the module-level statement that applies ``--key=value`` overrides to globals."""
    for i, stmt in enumerate(module.body):
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        calls = [dotted(n.func) for n in walk(stmt) if isinstance(n, cst.Call)]
        if "exec" in calls and "open" in calls:
            return i
        if "globals" in calls and any(dotted(n) == "sys.argv" for n in walk(stmt)):
            return i
    return None


def _trailing_comment(stmt: cst.SimpleStatementLine) -> str:
    comment = stmt.trailing_whitespace.comment
    return comment.value.lstrip("#").strip() if comment else ""


_CONTAINERS = (cst.List, cst.ListComp, cst.Dict, cst.DictComp, cst.Set, cst.SetComp, cst.Tuple, cst.GeneratorExp, cst.Lambda)


def read_globals(r: ParsedFile, upto: int) -> list[RawKnob]:
    """Module globals assigned a literal before the configurator runs, as nanoGPT's configurator sees them."""
    out: dict[str, RawKnob] = {}
    for stmt in r.module.body[:upto]:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            continue
        small = stmt.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target, value = small.targets[0].target, small.value
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            target, value = small.target, small.value
        else:
            continue
        if not isinstance(target, cst.Name) or target.value.startswith("_"):
            continue
        if isinstance(value, _CONTAINERS):
            continue  # not a scalar: the configurator cannot override it
        name = target.value
        ok, default = r.literal(value)
        where = r.where(stmt)
        help_text = _trailing_comment(stmt)
        if not ok:
            out[name] = RawKnob(name, "", None, help=help_text, flag=f"--{name}", source=where,
                                note="default is computed at run time")
        elif is_knob_value(default):
            # The configurator parses values with literal_eval, so --name=value with Python literals.
            out[name] = RawKnob(name, type_name(default), default, help=help_text, flag=f"--{name}", source=where)
    return list(out.values())


# ---------------------------------------------------------------- dataclasses


def is_dataclass_def(cls: cst.ClassDef) -> bool:
    for dec in cls.decorators:
        target = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        if dotted(target).rsplit(".", 1)[-1] == "dataclass":
            return True
    return False


def _config_classes(entry: ParsedFile, readers: list[ParsedFile], imported: dict[str, set[str]]) -> list[tuple[ParsedFile, cst.ClassDef]]:
    """Dataclasses the entry point takes its settings from: instantiated without arguments or handed to a parser
    (a class built with keyword arguments gets its values from elsewhere)."""
    uses: dict[str, bool] = {}
    for node in walk(entry.module):
        if not isinstance(node, cst.Call):
            continue
        if isinstance(node.func, cst.Name):
            uses[node.func.value] = uses.get(node.func.value, False) or not node.args
        for arg in node.args:
            values = [e.value for e in arg.value.elements] if isinstance(arg.value, (cst.Tuple, cst.List)) else [arg.value]
            for value in values:
                if isinstance(value, cst.Name):
                    uses[value.value] = True
    out = []
    for r in readers:
        for node in walk(r.module):
            if isinstance(node, cst.ClassDef) and is_dataclass_def(node) and uses.get(node.name.value):
                if r is entry or node.name.value in imported.get(r.rel, set()):
                    out.append((r, node))
    return out


def dataclass_cli(module: cst.Module) -> str:
    """Which parser turns the config into flags: tyro | hf | '' (none: defaults are rewritten in source)."""
    for node in walk(module):
        if isinstance(node, cst.Call):
            name = dotted(node.func)
            if name in ("tyro.cli", "cli") and "tyro" in module.code:
                return "tyro"
            if name.endswith("HfArgumentParser"):
                return "hf"
    return ""


def read_dataclasses(classes: list[tuple[ParsedFile, cst.ClassDef]], cli: str) -> list[RawKnob]:
    out: dict[str, RawKnob] = {}
    for r, cls in classes:
        for stmt in cls.body.body:
            if not isinstance(stmt, cst.SimpleStatementLine) or not isinstance(stmt.body[0], cst.AnnAssign):
                continue
            ann = stmt.body[0]
            if not isinstance(ann.target, cst.Name):
                continue
            name = ann.target.value
            declared = TYPES.get(dotted(ann.annotation.annotation), "")
            where = r.where(stmt)
            help_text = _trailing_comment(stmt)
            value = ann.value
            if isinstance(value, cst.Call) and dotted(value.func).rsplit(".", 1)[-1] == "field":
                value = next((a.value for a in value.args if a.keyword and a.keyword.value == "default"), None)
            if name in out:
                continue
            if value is None:
                out[name] = RawKnob(name, declared, None, help=help_text, source=where, note="no default")
                continue
            ok, default = r.literal(value)
            if not ok or not is_knob_value(default):
                out[name] = RawKnob(name, declared, None, help=help_text, source=where,
                                    note="default is not a bool, int, float or str literal")
                continue
            if declared == "float" and isinstance(default, int) and not isinstance(default, bool):
                default = float(default)
            kind = declared or type_name(default)
            if cli == "tyro":
                flag = "--" + name.replace("_", "-")
                style = "bool_optional" if kind == "bool" else "eq"
            elif cli == "hf":
                flag, style = f"--{name}", "eq"
            else:
                flag, style = "", "eq"
            out[name] = RawKnob(name, kind, default, help=help_text, flag=flag, flag_style=style, source=where)
    return list(out.values())


# ---------------------------------------------------------------- all together


def _reachable(repo: Path, entry: EntryPoint) -> tuple[list[ParsedFile], dict[str, set[str]]]:
    """The entry point and every repo module it imports, transitively, with the names taken from each."""
    readers = [ParsedFile(entry.path, entry.wrapper)]
    imported: dict[str, set[str]] = {}
    seen = {entry.path}
    i = 0
    while i < len(readers):
        r = readers[i]
        for imp in local_imports(repo, r.rel, r.module):
            imported.setdefault(imp.path, set()).update(imp.names)
            if imp.path not in seen:
                seen.add(imp.path)
                readers.append(ParsedFile(imp.path, parse(repo, imp.path)))
        i += 1
    return readers, imported


def discover(repo: Path, entry: EntryPoint, args: Sequence[str] = (), cwd: str = ".") -> Discovery:
    """The knobs ``entry`` reads; ``args``: the script's arguments on the owner's command, run in
    ``cwd`` (repo-relative), which choose the config files a nested config is read from."""
    readers, imported = _reachable(repo, entry)
    files = [r.rel for r in readers]
    entry_reader = readers[0]
    found = read_argparse(readers)
    style = "argparse"
    warnings: list[str] = []
    subcommand = ""
    if not found:
        cli = read_cli_library(entry_reader)
        if cli is not None:
            style, found, subcommand = cli.library, cli.knobs, cli.subcommand
            warnings += cli.warnings
    if not found:
        upto = configurator_index(entry_reader.module)
        if upto is not None:
            style, found = "globals", read_globals(entry_reader, upto)
        else:
            classes = _config_classes(entry_reader, readers, imported)
            if classes:
                parser = dataclass_cli(entry_reader.module)
                style, found = "dataclass", read_dataclasses(classes, parser)
                if not parser:
                    warnings.append(
                        "the dataclass config is not parsed from the command line: trials set its "
                        "defaults in source (knobs.*.flag is empty)"
                    )
    if not found:
        nested = nested_config(repo, readers, args, cwd)
        warnings += nested.warnings
        if nested.settings:
            style = "nested"
            found = [RawKnob(s.path, type_name(s.value), s.value, help=s.builder, flag=s.flag, source=s.source)
                     for s in nested.settings]
            # Skipped, so the command's setting of them stays as written and no knob is made of it.
            found += [RawKnob(flag.lstrip("-+"), "str", None, flag=flag, source="command", note=why)
                      for flag, why in nested.choosers.items()]
    if not found:
        warnings.append(
            f"{entry.path} reads no knobs (no argparse arguments, click/typer/fire command parameters, "
            "configurator globals, dataclass config, config node merged with command-line overrides, Hydra config "
            "or ml_collections config flag): nothing to tune but patches"
        )
    return Discovery(
        style=style,
        knobs=[k for k in found if not k.note],
        skipped=[k for k in found if k.note],
        files=files,
        warnings=warnings,
        subcommand=subcommand,
    )
