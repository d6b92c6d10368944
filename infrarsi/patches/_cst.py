"""Small libcst helpers the patches share: reading expressions, not rewriting them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

_EMPTY = cst.Module(body=[])
DEVICES = {"cuda", "cpu", "mps", "xpu"}
"""torch's device types, as scripts compare them (``device_type == "cuda"``)."""


def code(node: cst.CSTNode) -> str:
    """The source text of ``node`` as written (without its surrounding parentheses' whitespace)."""
    return _EMPTY.code_for_node(node).strip()


def dotted(node: cst.CSTNode | None) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, None for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def strip_parens(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[], rpar=[]) if node.lpar else node


def arg(call: cst.Call, position: int | None, keyword: str) -> cst.BaseExpression | None:
    """The value passed for a parameter, by keyword or by position (None when absent)."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for a in call.args:
        if a.keyword is not None and a.keyword.value == keyword:
            return a.value
    if position is not None and position < len(positional):
        return positional[position].value
    return None


def has_star_args(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def int_value(node: cst.BaseExpression | None) -> int | None:
    """The value of an integer literal such as ``-1`` or ``2`` (None for anything else)."""
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = int_value(node.expression)
        return None if inner is None else -inner
    return None


def single_assign(stmt: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    """``(name, value)`` for a line that is exactly ``name = value``."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        return small.targets[0].target.value, small.value
    return None


def leading_lines(stmt: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    """The blank and comment lines above a statement (both kinds of statement have them; their base
    class does not say so)."""
    return stmt.leading_lines if isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) else ()


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node``, depth first, ``node`` included."""
    yield node
    for child in node.children:
        yield from walk(child)


def names_in(node: cst.CSTNode) -> set[str]:
    """Every bare name read or written anywhere under ``node``."""
    found: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

    node.visit(_Names())
    return found


def functional_prefix(module: cst.Module) -> str:
    """How this module spells ``torch.nn.functional``: its alias when imported, else the full path."""
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                source = dotted(small.module) if small.module else None
                for alias in small.names:
                    full = f"{source}.{dotted(alias.name)}"
                    if full == "torch.nn.functional":
                        return alias.evaluated_alias or alias.evaluated_name
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if dotted(alias.name) == "torch.nn.functional" and (asname := alias.evaluated_alias):
                        return asname
    return "torch.nn.functional"


def imports_name(module: cst.Module, name: str) -> bool:
    """True when the module binds ``name`` at top level by an import (``import torch``…)."""
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                    for alias in small.names:
                        bound: cst.BaseExpression = alias.asname.name if alias.asname else alias.name
                        if isinstance(bound, cst.Attribute):
                            bound = bound.value
                            while isinstance(bound, cst.Attribute):
                                bound = bound.value
                        if isinstance(bound, cst.Name) and bound.value == name:
                            return True
    return False


def after_imports(module: cst.Module) -> int:
    """Index of the first top-level statement after the module's docstring and leading imports."""
    index = 0
    for i, stmt in enumerate(module.body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):
            index = i + 1
        elif i == 0 and isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr) and isinstance(
            stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)
        ):
            index = 1
        else:
            break
    return index
