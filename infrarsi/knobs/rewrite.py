"""Rewriting knob defaults where a script reads them, keeping its formatting and comments.

Used for knobs with no command-line flag (a dataclass config nobody parses) and by ``apply`` to
write the winning settings into the user's source. These places are rewritten:
``parser.add_argument(..., default=X)`` and ``parser.set_defaults(name=X)`` by dest name, a
module-level ``name = X``, a dataclass field ``name: T = X`` (or ``field(default=X)``), and the
settings written in code that ``knobs/literals.py`` names: a keyword of every ``DataLoader(...)``
that writes it as a literal or leaves it out, ``torch.set_num_threads(X)`` and
``torch.backends.cudnn.benchmark = X``.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from infrarsi.contract import KnobValue
from infrarsi.knobs.dataflow import LOADER_KEYWORDS
from infrarsi.knobs.discover import argparse_dest, is_dataclass_def
from infrarsi.knobs.literals import CUDNN_BENCHMARK, LOADER, THREADS_CALL, knob_name
from infrarsi.knobs.source import dotted, literal


class KnobRewriteError(ValueError):
    """A knob named in the values is not declared in the source."""


def _value(value: KnobValue) -> cst.BaseExpression:
    if not isinstance(value, (bool, int, float, str)):
        raise KnobRewriteError(f"cannot write {value!r} ({type(value).__name__}) as a knob default")
    return cst.parse_expression(repr(value))


class _SetDefaults(cst.CSTTransformer):
    """Rewrites argparse calls anywhere, module-level declarations and dataclass fields."""

    def __init__(self, values: dict[str, KnobValue]):
        self.values = values
        self.found: set[str] = set()

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        callee = dotted(updated.func).rsplit(".", 1)[-1]
        if callee == LOADER:
            return self._loader(updated)
        threads = knob_name(THREADS_CALL)
        if callee == THREADS_CALL and threads in self.values and len(updated.args) == 1 \
                and _is_literal(updated.args[0].value):
            self.found.add(threads)
            return updated.with_changes(args=[updated.args[0].with_changes(value=_value(self.values[threads]))])
        if not isinstance(updated.func, cst.Attribute):
            return updated
        method = updated.func.attr.value
        if method == "add_argument":
            dest, _ = argparse_dest(updated)
            if dest in self.values:
                self.found.add(dest)
                return _with_keyword(updated, "default", _value(self.values[dest]))
        elif method == "set_defaults":
            for arg in updated.args:
                if arg.keyword is not None and arg.keyword.value in self.values:
                    self.found.add(arg.keyword.value)
                    updated = _with_keyword(updated, arg.keyword.value, _value(self.values[arg.keyword.value]))
        return updated

    def _loader(self, call: cst.Call) -> cst.Call:
        """The loader with each of its speed keywords that a knob sets written, unless the loader
        passes that keyword as an expression (the script's own value)."""
        for keyword in LOADER_KEYWORDS:
            name = knob_name(LOADER, keyword)
            if name not in self.values:
                continue
            given = next((a for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
            if given is not None and not _is_literal(given.value):
                continue
            self.found.add(name)
            splats = [i for i, a in enumerate(call.args) if a.star == "**"]
            if given is None and splats:
                # ``**kwargs`` may carry the keyword too: written into the last one, the knob's value wins.
                args = list(call.args)
                last = args[splats[-1]]
                merged = cst.ensure_type(cst.parse_expression(f"{{**x, {keyword!r}: {self.values[name]!r}}}"), cst.Dict)
                merged = merged.with_changes(elements=[cst.StarredDictElement(last.value), *merged.elements[1:]])
                args[splats[-1]] = last.with_changes(value=merged)
                call = call.with_changes(args=args)
            else:
                call = _with_keyword(call, keyword, _value(self.values[name]))
        return call

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        name = knob_name(CUDNN_BENCHMARK)
        if name in self.values and len(updated.targets) == 1 \
                and dotted(updated.targets[0].target).endswith(CUDNN_BENCHMARK) and _is_literal(updated.value):
            self.found.add(name)
            return updated.with_changes(value=_value(self.values[name]))
        return updated

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        if not is_dataclass_def(updated) or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        return updated.with_changes(body=updated.body.with_changes(body=self._declarations(updated.body.body, set())))

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        # Only statements directly in the module declare globals: a later `device = ...` under an
        # `if` is the script computing a value, not a knob.
        return updated.with_changes(body=self._declarations(updated.body, set()))

    def _declarations(self, body: Sequence[cst.BaseStatement], done: set[str]) -> list[cst.BaseStatement]:
        """Statements with the first declaration of each knob rewritten."""
        out = []
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
                small = stmt.body[0]
                name = _declared_name(small)
                # Always an assignment when it declares a name; the isinstance says so to mypy.
                if name in self.values and name not in done and isinstance(small, (cst.Assign, cst.AnnAssign)):
                    new = _with_declared_value(small, _value(self.values[name]))
                    if new is not None:
                        done.add(name)
                        self.found.add(name)
                        stmt = stmt.with_changes(body=[new])
            out.append(stmt)
        return out


def _declared_name(small: cst.BaseSmallStatement) -> str | None:
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        return small.targets[0].target.value
    if isinstance(small, cst.AnnAssign) and small.value is not None and isinstance(small.target, cst.Name):
        return small.target.value
    return None


def _with_declared_value(small: cst.Assign | cst.AnnAssign, new: cst.BaseExpression) -> cst.Assign | cst.AnnAssign | None:
    """The declaration with its value (or its ``field(default=…)``) replaced; None for ``field(default_factory=…)``."""
    value = small.value
    if isinstance(value, cst.Call) and dotted(value.func).rsplit(".", 1)[-1] == "field":
        if not any(a.keyword is not None and a.keyword.value == "default" for a in value.args):
            return None
        return small.with_changes(value=_with_keyword(value, "default", new))
    return small.with_changes(value=new)


def _is_literal(node: cst.BaseExpression) -> bool:
    return literal(cst.Module([]), node)[0]


def _with_keyword(call: cst.Call, keyword: str, new: cst.BaseExpression) -> cst.Call:
    """``call`` with ``keyword=new``: replaced in place when present, appended otherwise."""
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == keyword:
            args[i] = arg.with_changes(value=new)
            return call.with_changes(args=args)
    if args and isinstance(args[-1].comma, cst.MaybeSentinel):
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    no_space = cst.SimpleWhitespace("")
    args.append(cst.Arg(keyword=cst.Name(keyword), value=new,
                        equal=cst.AssignEqual(whitespace_before=no_space, whitespace_after=no_space)))
    return call.with_changes(args=args)


def set_defaults(source: str, values: dict[str, KnobValue]) -> str:
    """``source`` with each knob's default set to ``values[name]``; raises KnobRewriteError naming
    every knob it could not find."""
    module = cst.parse_module(source)
    transformer = _SetDefaults(values)
    out = module.visit(transformer)
    missing = sorted(set(values) - transformer.found)
    if missing:
        raise KnobRewriteError(
            f"knob(s) {', '.join(missing)} not declared in this source (no add_argument dest, "
            "module-level assignment, dataclass field or setting written in code by that name)"
        )
    return out.code
