"""The knob a gated patch adds so its change can be switched off without editing the code again.

A patch is one on/off dimension of the search, so an applied patch is active: the knob it adds
defaults to on. Where the file parses its command line with a module-level ``argparse`` parser,
the knob is a ``--name/--no-name`` flag (``BooleanOptionalAction``); otherwise it is a module
global, nanoGPT style, placed before a ``configurator.py`` exec when the script has one (so
``--name=False`` overrides it) and after the imports otherwise. The added knob is reported as a
contract :class:`Knob` so the search and ``infrarsi apply`` can set it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from infrarsi.contract import Knob
from infrarsi.patches._cst import after_imports, dotted

NOTE = "added by InfraRSI"


def _top_calls(module: cst.Module) -> Iterator[tuple[int, str | None, cst.Call]]:
    """``(index, call)`` for every top-level ``name = call(...)`` / ``call(...)`` statement."""
    for i, stmt in enumerate(module.body):
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            small = stmt.body[0]
            value = small.value if isinstance(small, (cst.Assign, cst.Expr)) else None
            if isinstance(value, cst.Call):
                target = small.targets[0].target if isinstance(small, cst.Assign) and len(small.targets) == 1 else None
                yield i, dotted(target) if target is not None else None, value


def _argparse(module: cst.Module) -> tuple[str, str, int] | None:
    """``(parser, args, index of the last add_argument)`` for a module-level argparse setup."""
    parser = args = None
    last = None
    for i, target, call in _top_calls(module):
        name = dotted(call.func) or ""
        if name in ("argparse.ArgumentParser", "ArgumentParser") and target:
            parser = target
        elif parser and name == f"{parser}.add_argument":
            last = i
        elif parser and name in (f"{parser}.parse_args", f"{parser}.parse_known_args") and target:
            args = target
    if parser and args and last is not None:
        return parser, args, last
    return None


def _configurator(module: cst.Module) -> int | None:
    """Index of nanoGPT's ``exec(open('configurator.py').read())``, which reads ``--key=value``."""
    for i, _, call in _top_calls(module):
        if dotted(call.func) == "exec" and "configurator" in cst.Module(body=[]).code_for_node(call):
            return i
    return None


def add_gate(module: cst.Module, path: str, name: str, role: str, help: str) -> tuple[cst.Module, str, Knob, int]:
    """Add an on-by-default boolean knob.

    Returns the new module, the expression that reads the knob, the knob, and the index of the
    top-level statement that defines it.
    """
    found = _argparse(module)
    if found is not None:
        parser, args, last = found
        line = cst.parse_statement(
            f'{parser}.add_argument("--{name}", action=argparse.BooleanOptionalAction, default=True,\n'
            f'    help="{help} ({NOTE}; --no-{name} turns it off)")\n'
        )
        body = [*module.body[: last + 1], line, *module.body[last + 1 :]]
        knob = Knob(name=name, role=role, type="bool", default=True, flag=f"--{name}", flag_style="bool_optional",
                    domain=[True, False], tunable=True, help=help, source=f"{path}:{_line_of(module, body, last + 1)}")
        return module.with_changes(body=body), f"{args}.{name}", knob, last + 1
    exec_at = _configurator(module)
    index = exec_at if exec_at is not None else after_imports(module)
    line = cst.parse_statement(f"{name} = True  # {help} ({NOTE})\n")
    if index == after_imports(module) and exec_at is None:
        line = line.with_changes(leading_lines=[cst.EmptyLine()])
    body = [*module.body[:index], line, *module.body[index:]]
    flag, style = (f"--{name}", "eq") if exec_at is not None else ("", "eq")
    knob = Knob(name=name, role=role, type="bool", default=True, flag=flag, flag_style=style,
                domain=[True, False], tunable=True, help=help, source=f"{path}:{_line_of(module, body, index)}")
    return module.with_changes(body=body), name, knob, index


def _line_of(module: cst.Module, body: Sequence[cst.BaseStatement], index: int) -> int:
    """1-based line of ``body[index]`` in ``module`` with ``body`` (its first code line)."""
    before = module.with_changes(body=body[:index]).code
    leading = sum(1 for _ in getattr(body[index], "leading_lines", ()))
    return before.count("\n") + leading + 1
