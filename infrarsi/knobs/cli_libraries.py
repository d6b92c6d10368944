"""Knobs of scripts whose command line click, typer or python-fire builds from a function's parameters.

- click: ``@click.option("--batch-size", "-b", default=32, type=int)`` on a ``@click.command()``
  (or a command of a ``@click.group()``); ``is_flag=True`` and ``"--compile/--no-compile"`` are
  switches, ``@click.argument`` is positional (left to the command);
- typer: the parameters of ``typer.run(main)`` or an ``@app.command()``, as ``batch_size: int = 32``,
  ``= typer.Option(32, …)`` or ``Annotated[int, typer.Option(…)] = 32``, passed as ``--batch-size``;
  booleans as ``--flag/--no-flag``;
- fire: the parameters of ``fire.Fire(main)``, of a class's ``__init__`` (``fire.Fire(Trainer)``) or
  of a dict's functions (``fire.Fire({"train": train})``), passed as ``--name=value``.

Each knob is named after the function parameter that receives its value (its ``receiver``), which
is where the data flow (``infrarsi.knobs.dataflow``) starts following it. Only the entry point's
own commands are read; a group of several commands is read for the one named ``train``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from infrarsi.knobs.raw import TYPES, RawKnob
from infrarsi.knobs.source import ParsedFile, dotted, is_knob_value, string_literal, type_name, walk

LIBRARIES = ("click", "typer", "fire")
_CLICK_TYPES = {"INT": "int", "FLOAT": "float", "STRING": "str", "BOOL": "bool", "IntRange": "int",
                "FloatRange": "float"}
_CHOSEN_SUBCOMMAND = "train"


@dataclass(frozen=True, slots=True)
class CliCommand:
    """A function a CLI library calls with the command line's values."""

    function: cst.FunctionDef
    receiver: str
    """``file:function`` as the data flow scopes it (``train.py:Trainer.__init__``)."""
    name: str
    """What the command line says before the flags to pick it (a group's command), '' for a lone command."""


@dataclass(slots=True)
class CliKnobs:
    library: str
    """click | typer | fire."""
    knobs: list[RawKnob] = field(default_factory=list)
    """Read and skipped alike (a skipped one has a note)."""
    subcommand: str = ""
    warnings: list[str] = field(default_factory=list)


def _imported(module: cst.Module) -> set[str]:
    out: set[str] = set()
    for node in walk(module):
        if isinstance(node, cst.Import):
            out |= {dotted(a.name).split(".", 1)[0] for a in node.names}
        elif isinstance(node, cst.ImportFrom) and node.module is not None:
            out.add(dotted(node.module).split(".", 1)[0])
    return out


def _keywords(call: cst.Call) -> dict[str, cst.BaseExpression]:
    return {a.keyword.value: a.value for a in call.args if a.keyword is not None}


def _decorator_calls(fn: cst.FunctionDef) -> list[tuple[str, cst.Call | None]]:
    """(dotted name, call or None) of each decorator, outermost first."""
    out: list[tuple[str, cst.Call | None]] = []
    for dec in fn.decorators:
        node = dec.decorator
        out.append((dotted(node.func), node) if isinstance(node, cst.Call) else (dotted(node), None))
    return out


def _top_level(module: cst.Module) -> dict[str, cst.FunctionDef | cst.ClassDef]:
    return {s.name.value: s for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}


def _pick(library: str, commands: list[CliCommand], needs_name: bool) -> tuple[CliCommand | None, list[str]]:
    """The command trials run: a lone one, else the group's ``train``."""
    if not commands:
        return None, []
    if len(commands) == 1 and not needs_name:
        return CliCommand(commands[0].function, commands[0].receiver, ""), []
    chosen = next((c for c in commands if c.name == _CHOSEN_SUBCOMMAND), None)
    if len(commands) == 1:
        chosen = commands[0]
    names = ", ".join(c.name for c in commands)
    if chosen is None:
        return None, [f"the {library} commands ({names}) include none named {_CHOSEN_SUBCOMMAND!r}: "
                      "no knobs read from them"]
    return chosen, [f"{library} command {chosen.name!r} read (of {names}): trials pass its name before the flags"]


# ---------------------------------------------------------------- the knob, as every library reads it


def _knob(r: ParsedFile, name: str, declared: str, default: cst.BaseExpression | None, *, flag: str,
          flag_style: str, help_text: str, where: str, receiver: str) -> RawKnob:
    def skipped(note: str) -> RawKnob:
        return RawKnob(name, declared, None, flag=flag, help=help_text, source=where, receiver=receiver, note=note)

    if default is None:
        return skipped("no default")
    ok, value = r.literal(default)
    if not ok:
        return skipped("default is computed at run time")
    if value is None:
        return skipped("default is None")
    if not isinstance(value, (bool, int, float, str)):
        return skipped(f"default {value!r} is not a bool, int, float or str")
    if declared == "float" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if declared in ("int", "float") and not isinstance(value, (int, float)):
        return skipped(f"default {value!r} is not a valid {declared}")
    return RawKnob(name, declared or type_name(value), value, flag=flag, flag_style=flag_style, help=help_text,
                   source=where, receiver=receiver)


def _switch(r: ParsedFile, name: str, decl: str, default: cst.BaseExpression | None, *, help_text: str,
            where: str, receiver: str) -> RawKnob:
    """A boolean switch: ``--x/--no-x`` (bool_optional) or a lone ``--x`` that only turns it on."""
    on, _, off = decl.partition("/")
    on, off = on.strip(), off.strip()
    knob = _knob(r, name, "bool", default if default is not None else cst.Name("False"), flag=on,
                 flag_style="bool_optional" if off else "store_true", help_text=help_text, where=where,
                 receiver=receiver)
    if knob.note or not isinstance(knob.default, bool):
        return knob if knob.note else RawKnob(name, "bool", None, flag=on, help=help_text, source=where,
                                              receiver=receiver, note="switch whose default is not True/False")
    if off and off != "--no-" + on.removeprefix("--"):
        return RawKnob(name, "bool", None, flag=on, help=help_text, source=where, receiver=receiver,
                       note=f"its off switch {off} is not --no-{on.removeprefix('--')}")
    if not off and knob.default:
        return RawKnob(name, "bool", None, flag=on, help=help_text, source=where, receiver=receiver,
                       note="a switch that is on by default and has no off switch")
    return knob


def _long_flag(decls: list[str]) -> str:
    return next((d for d in decls if d.startswith("--")), "")


# ---------------------------------------------------------------- click


def _click_name(decls: list[str]) -> str:
    """click's parameter name: an explicit identifier, else the option with the longest prefix."""
    explicit = next((d for d in decls if d.isidentifier()), None)
    if explicit is not None:
        return explicit
    options = sorted((d.split("/", 1)[0].strip() for d in decls), key=lambda d: -(len(d) - len(d.lstrip("-"))))
    return options[0].lstrip("-").replace("-", "_").lower() if options else ""


def _click_command_name(fn: cst.FunctionDef, call: cst.Call | None) -> str:
    if call is not None:
        given = string_literal(call.args[0].value) if call.args and call.args[0].keyword is None else None
        given = given or string_literal(_keywords(call).get("name"))
        if given:
            return given
    name = fn.name.value.lower().replace("_", "-")
    head, sep, suffix = name.rpartition("-")
    return head if sep and suffix in ("command", "cmd", "group", "grp") else name


def _click_option(r: ParsedFile, fn: CliCommand, call: cst.Call) -> RawKnob:
    decls = [s for a in call.args if a.keyword is None and (s := string_literal(a.value)) is not None]
    kw = _keywords(call)
    name = _click_name(decls)
    where, help_text = r.where(call), string_literal(kw.get("help")) or ""
    flag = _long_flag(decls)
    if not flag:
        return RawKnob(name, "", None, source=where, help=help_text, receiver=fn.receiver,
                       note="only a short option: click reads '-x=v' as the value '=v'")
    if "multiple" in kw or "nargs" in kw or "count" in kw:
        return RawKnob(name, "", None, flag=flag, source=where, help=help_text, receiver=fn.receiver,
                       note="takes several values or counts")
    if "/" in flag or _true(r, kw.get("is_flag")):
        return _switch(r, name, flag, kw.get("default"), help_text=help_text, where=where, receiver=fn.receiver)
    type_node = kw.get("type")
    declared, choices = "", ()
    if isinstance(type_node, cst.Call) and dotted(type_node.func).rsplit(".", 1)[-1] == "Choice" and type_node.args:
        ok, values = r.literal(type_node.args[0].value)
        if ok and isinstance(values, (list, tuple)) and all(is_knob_value(v) for v in values):
            choices = tuple(values)
    elif type_node is not None:
        short = dotted(type_node.func if isinstance(type_node, cst.Call) else type_node).rsplit(".", 1)[-1]
        declared = TYPES.get(short) or _CLICK_TYPES.get(short, "")
    knob = _knob(r, name, declared, kw.get("default"), flag=flag, flag_style="eq", help_text=help_text,
                 where=where, receiver=fn.receiver)
    if choices and not knob.note:
        knob = RawKnob(knob.name, knob.type, knob.default, choices, knob.help, knob.flag, knob.flag_style,
                       knob.source, receiver=knob.receiver)
    return knob


def _true(r: ParsedFile, node: cst.BaseExpression | None) -> bool:
    return node is not None and r.literal(node) == (True, True)


def _click(r: ParsedFile, receiver_file: str) -> CliKnobs | None:
    groups = {fn.name.value for fn in r.module.body if isinstance(fn, cst.FunctionDef)
              and any(d.rsplit(".", 1)[-1] == "group" for d, _ in _decorator_calls(fn))}
    lone, grouped = [], []
    for fn in (s for s in r.module.body if isinstance(s, cst.FunctionDef)):
        for name, call in _decorator_calls(fn):
            head, _, tail = name.rpartition(".")
            command = CliCommand(fn, f"{receiver_file}:{fn.name.value}", _click_command_name(fn, call))
            if name in ("click.command", "command"):
                lone.append(command)
            elif tail == "command" and head in groups:
                grouped.append(command)
    # With a group in the script, a plain command is one of its commands (``cli.add_command(train)``).
    chosen, warnings = _pick("click", grouped or lone, needs_name=bool(groups))
    if chosen is None:
        return CliKnobs("click", warnings=warnings) if warnings else None
    knobs = []
    for name, call in _decorator_calls(chosen.function):
        kind = name.rsplit(".", 1)[-1]
        if call is not None and kind == "option":
            knobs.append(_click_option(r, chosen, call))
        elif call is not None and kind == "argument":
            decls = [s for a in call.args if a.keyword is None and (s := string_literal(a.value)) is not None]
            knobs.append(RawKnob(_click_name(decls), "", None, source=r.where(call), receiver=chosen.receiver,
                                 note="positional argument: the workload command must supply it"))
    return CliKnobs("click", knobs, chosen.name, warnings)


# ---------------------------------------------------------------- typer


def _annotation(node: cst.Annotation | None) -> tuple[str, cst.Call | None]:
    """(declared type, the typer.Option/Argument of an ``Annotated[...]``) of a parameter's annotation."""
    if node is None:
        return "", None
    ann = node.annotation
    if isinstance(ann, cst.Subscript):
        head = dotted(ann.value).rsplit(".", 1)[-1]
        parts = [el.slice.value for el in ann.slice if isinstance(el.slice, cst.Index)]
        if head == "Annotated" and parts:
            marker = next((p for p in parts[1:] if isinstance(p, cst.Call)), None)
            return TYPES.get(dotted(parts[0]), ""), marker
        if head == "Optional" and parts:
            return TYPES.get(dotted(parts[0]), ""), None
    return TYPES.get(dotted(ann), ""), None


def _typer_param(r: ParsedFile, fn: CliCommand, param: cst.Param) -> RawKnob:
    name = param.name.value
    declared, marker = _annotation(param.annotation)
    default = param.default
    if isinstance(default, cst.Call) and dotted(default.func).rsplit(".", 1)[-1] in ("Option", "Argument"):
        marker, args = default, list(default.args)
        # The old style: the default is the first positional argument, the flags follow it.
        first = args[0] if args and args[0].keyword is None else None
        default = first.value if first is not None else _keywords(default).get("default")
        decl_args = args[1:] if first is not None else args
    else:
        decl_args = list(marker.args) if marker is not None else []
    where = r.where(param)
    kw = _keywords(marker) if marker is not None else {}
    help_text = string_literal(kw.get("help")) or ""
    is_argument = marker is not None and dotted(marker.func).rsplit(".", 1)[-1] == "Argument"
    if is_argument or (marker is None and param.default is None):
        return RawKnob(name, declared, None, source=where, receiver=fn.receiver,
                       note="positional argument: the workload command must supply it")
    if isinstance(default, cst.Ellipsis):
        default = None  # typer's "required"
    decls = [s for a in decl_args if a.keyword is None and (s := string_literal(a.value)) is not None]
    flag = _long_flag(decls) or "--" + name.replace("_", "-")
    if declared == "bool" or "/" in flag:
        if "/" not in flag and not decls:
            flag = f"{flag}/--no-{flag.removeprefix('--')}"
        return _switch(r, name, flag, default, help_text=help_text, where=where, receiver=fn.receiver)
    return _knob(r, name, declared, default, flag=flag, flag_style="eq", help_text=help_text, where=where,
                 receiver=fn.receiver)


def _typer(r: ParsedFile, receiver_file: str) -> CliKnobs | None:
    functions = _top_level(r.module)
    apps = {dotted(s.body[0].targets[0].target) for s in r.module.body
            if isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Assign)
            and isinstance(s.body[0].value, cst.Call) and dotted(s.body[0].value.func) in ("typer.Typer", "Typer")}
    commands, has_callback = [], False
    for fn in (s for s in r.module.body if isinstance(s, cst.FunctionDef)):
        for name, call in _decorator_calls(fn):
            head, _, tail = name.rpartition(".")
            if head in apps and tail == "callback":
                has_callback = True
            if head in apps and tail == "command":
                given = string_literal(call.args[0].value) if call is not None and call.args and call.args[0].keyword is None \
                    else None
                commands.append(CliCommand(fn, f"{receiver_file}:{fn.name.value}",
                                           given or fn.name.value.lower().replace("_", "-")))
    for node in walk(r.module):
        if isinstance(node, cst.Call) and dotted(node.func) in ("typer.run", "run") and node.args:
            target = functions.get(dotted(node.args[0].value))
            if isinstance(target, cst.FunctionDef):
                commands = [CliCommand(target, f"{receiver_file}:{target.name.value}", "")]
                has_callback = False
    # typer runs a lone command without its name, unless a callback makes the app a group.
    chosen, warnings = _pick("typer", commands, needs_name=has_callback)
    if chosen is None:
        return CliKnobs("typer", warnings=warnings) if warnings else None
    params = [*chosen.function.params.params, *chosen.function.params.kwonly_params]
    return CliKnobs("typer", [_typer_param(r, chosen, p) for p in params], chosen.name, warnings)


# ---------------------------------------------------------------- fire


def _fire_target(functions: dict, node: cst.BaseExpression, receiver_file: str, name: str) -> CliCommand | None:
    target = functions.get(dotted(node))
    if isinstance(target, cst.FunctionDef):
        return CliCommand(target, f"{receiver_file}:{target.name.value}", name)
    if isinstance(target, cst.ClassDef) and isinstance(target.body, cst.IndentedBlock):
        init = next((s for s in target.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"),
                    None)
        if init is not None:
            return CliCommand(init, f"{receiver_file}:{target.name.value}.__init__", name)
    return None


def _fire(r: ParsedFile, receiver_file: str) -> CliKnobs | None:
    functions = _top_level(r.module)
    call = next((n for n in walk(r.module) if isinstance(n, cst.Call) and dotted(n.func) in ("fire.Fire", "Fire")),
                None)
    if call is None:
        return None
    if not call.args:
        return CliKnobs("fire", warnings=["fire.Fire() without a component exposes the whole module: "
                                          "no knobs read from it"])
    component = call.args[0].value
    commands: list[CliCommand] = []
    if isinstance(component, cst.Dict):
        for el in component.elements:
            key = string_literal(el.key) if isinstance(el, cst.DictElement) else None
            command = _fire_target(functions, el.value, receiver_file, key) if key else None
            if command is not None:
                commands.append(command)
    elif (command := _fire_target(functions, component, receiver_file, "")) is not None:
        commands.append(command)
    chosen, warnings = _pick("fire", commands, needs_name=isinstance(component, cst.Dict))
    if chosen is None:
        return CliKnobs("fire", warnings=warnings) if warnings else None
    knobs = []
    for param in [*chosen.function.params.params, *chosen.function.params.kwonly_params]:
        name = param.name.value
        if name == "self":
            continue
        declared, _ = _annotation(param.annotation)
        where = r.where(param)
        if param.default is None:
            knobs.append(RawKnob(name, declared, None, flag=f"--{name}", source=where, receiver=chosen.receiver,
                                 note="no default"))
            continue
        # fire parses every value as a Python literal, so --name=value with True/False for booleans.
        knobs.append(_knob(r, name, declared, param.default, flag=f"--{name}", flag_style="eq", help_text="",
                           where=where, receiver=chosen.receiver))
    return CliKnobs("fire", knobs, chosen.name or _fire_method(functions, component), warnings)


def _fire_method(functions: dict, component: cst.BaseExpression) -> str:
    """The method fire calls after building a class from the flags: its ``train``, when it has one."""
    cls = functions.get(dotted(component))
    if isinstance(cls, cst.ClassDef) and isinstance(cls.body, cst.IndentedBlock) and any(
            isinstance(s, cst.FunctionDef) and s.name.value == _CHOSEN_SUBCOMMAND for s in cls.body.body):
        return _CHOSEN_SUBCOMMAND
    return ""


def read_cli_library(entry: ParsedFile) -> CliKnobs | None:
    """The knobs of the entry point's click, typer or fire command; None when it uses none of them."""
    imported = _imported(entry.module)
    readers = {"click": _click, "typer": _typer, "fire": _fire}
    # typer is built on click: a script importing both is read as typer when typer finds a command.
    for library in ("typer", "click", "fire"):
        if library in imported and (found := readers[library](entry, entry.rel)) is not None:
            return found
    return None
