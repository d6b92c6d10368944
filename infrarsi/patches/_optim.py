"""Recognising ``torch.optim`` constructor calls, shared by the optimizer-implementation patches."""

from __future__ import annotations

import libcst as cst

from infrarsi.patches._cst import dotted

OPTIMIZERS = {"Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta", "ASGD", "Rprop"}


def imported_from_optim(module: cst.Module) -> set[str]:
    """Optimizer class names bound by ``from torch.optim import ...``."""
    names: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.ImportFrom) and small.module is not None and dotted(small.module) == "torch.optim" \
                        and not isinstance(small.names, cst.ImportStar):
                    names |= {a.name.value for a in small.names if isinstance(a.name, cst.Name) and a.asname is None}
    return names


def optimizer_class(call: cst.Call, bare: set[str]) -> str | None:
    """``AdamW`` for ``torch.optim.AdamW(...)``, ``optim.AdamW(...)`` or an imported ``AdamW(...)``."""
    name = dotted(call.func) or ""
    head, _, cls = name.rpartition(".")
    if cls in OPTIMIZERS and (head in ("torch.optim", "optim") or (not head and cls in bare)):
        return cls
    return None


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def with_keyword(call: cst.Call, name: str, value: str) -> cst.Call:
    """``call`` with ``name=value``: replaced in place when present, appended otherwise."""
    new = cst.Arg(cst.parse_expression(value), keyword=cst.Name(name),
                  equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    existing = keyword(call, name)
    if existing is not None:
        return call.with_changes(args=[new.with_changes(comma=a.comma) if a is existing else a for a in call.args])
    args = list(call.args)
    if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    elif args and isinstance(args[-1].comma, cst.Comma):
        # a trailing comma, one argument per line: the new one takes the last line's place and
        # layout, the old last argument gets the separator the others use
        separator = args[-2].comma if len(args) > 1 else args[-1].comma
        return call.with_changes(args=[*args[:-1], args[-1].with_changes(comma=separator), new.with_changes(comma=args[-1].comma)])
    return call.with_changes(args=[*args, new])


def without_keyword(call: cst.Call, name: str) -> cst.Call:
    existing = keyword(call, name)
    if existing is None:
        return call
    args = [a for a in call.args if a is not existing]
    if args and existing is call.args[-1]:
        args[-1] = args[-1].with_changes(comma=existing.comma)
    return call.with_changes(args=args)
