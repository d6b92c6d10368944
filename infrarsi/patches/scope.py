"""Is a change inside the contract's editable scope? Paths, and optionally functions."""

from __future__ import annotations

import difflib

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from infrarsi.contract import Contract


def _function_spans(source: str, qualnames: set[str]) -> list[tuple[int, int]]:
    """1-based inclusive line spans of the named functions (``Class.method`` or ``function``)."""
    wrapper = MetadataWrapper(cst.parse_module(source))
    positions = wrapper.resolve(PositionProvider)
    spans: list[tuple[int, int]] = []
    stack: list[str] = []

    class _Walk(cst.CSTVisitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            stack.append(node.name.value)

        def leave_ClassDef(self, node: cst.ClassDef) -> None:
            stack.pop()

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            stack.append(node.name.value)
            if ".".join(stack) in qualnames:
                where = positions[node]
                spans.append((where.start.line, where.end.line))

        def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
            stack.pop()

    wrapper.module.visit(_Walk())
    return spans


def scope_violation(rel: str, before: str, after: str, contract: Contract) -> str | None:
    """Why changing ``rel`` from ``before`` to ``after`` breaks the scope, or None when it may."""
    if rel in contract.scope.locked:
        return f"contract: touches locked file {rel}"
    if not contract.scope.allows(rel):
        return f"contract: touches {rel}, outside the editable scope"
    prefix = f"{rel}::"
    qualnames = {f[len(prefix):] for f in contract.scope.functions if f.startswith(prefix)}
    if not qualnames:
        return None
    spans = _function_spans(before, qualnames)
    old = before.splitlines()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(a=old, b=after.splitlines(), autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        # replaced/deleted lines i1+1..i2; an insertion sits after line i1
        lines = range(i1 + 1, i2 + 1) if tag != "insert" else [max(i1, 1)]
        for line in lines:
            if not any(start <= line <= end for start, end in spans):
                return f"contract: changes {rel}:{line}, outside the editable functions {sorted(qualnames)}"
    return None
