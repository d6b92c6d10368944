"""The user's Python sources as init sees them: which files count, parsed with clear errors, local imports.

Nothing here imports or runs the user's code; files are read and parsed with ``ast`` (for exact
syntax-error positions) and libcst (for everything else).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from infrarsi.contract import KnobValue

# Directories that hold no source of the job: tool state, environments, build output.
SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", "build", "dist", "venv", "env"}


class DiscoveryError(Exception):
    """Init cannot read the repo; the message names the file (and line) and what to do."""


def python_files(repo: Path) -> list[str]:
    """Repo-relative POSIX paths of every Python source, sorted; hidden and environment dirs skipped."""
    out = []
    for path in repo.rglob("*.py"):
        parts = path.relative_to(repo).parts
        if any(p.startswith(".") or p in SKIP_DIRS for p in parts[:-1]):
            continue
        if path.is_file():
            out.append(path.relative_to(repo).as_posix())
    return sorted(out)


def read_text(repo: Path, rel: str) -> str:
    try:
        return (repo / rel).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DiscoveryError(f"{rel} is not UTF-8 text ({err.reason} at byte {err.start})") from None


def parse(repo: Path, rel: str, text: str | None = None) -> MetadataWrapper:
    """Parse one file; a syntax error names the file and line as Python reports them."""
    text = read_text(repo, rel) if text is None else text
    try:
        ast.parse(text, filename=rel)
    except SyntaxError as err:
        raise DiscoveryError(
            f"SyntaxError in {rel} line {err.lineno}: {err.msg}. Fix the file (init never runs it) and retry."
        ) from None
    return MetadataWrapper(cst.parse_module(text))


def literal(module: cst.Module, node: cst.BaseExpression) -> tuple[bool, object]:
    """(True, value) when ``node`` is a Python literal or arithmetic on numbers (``4 * 2``, ``2**4``,
    ``64 // 8``); (False, None) for any other expression."""
    text = module.code_for_node(node).strip()
    try:
        return True, ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    try:
        return True, _fold(ast.parse(text, mode="eval").body)
    except (ValueError, SyntaxError, TypeError, ZeroDivisionError, OverflowError, RecursionError):
        return False, None


_FOLD = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
         ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}


def _fold(node: ast.AST) -> int | float:
    """The value of arithmetic on int and float literals; ValueError for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _fold(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _fold(node.left), _fold(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > 64:
                raise ValueError("exponent too large to fold")
            return left**right
        if type(node.op) in _FOLD:
            return _FOLD[type(node.op)](left, right)
    raise ValueError(f"cannot fold {type(node).__name__}")


def is_knob_value(value: object) -> TypeGuard[KnobValue]:
    return isinstance(value, (bool, int, float, str))


def type_name(value: KnobValue) -> str:
    return type(value).__name__


def dotted(node: cst.CSTNode | None) -> str:
    """``a.b.c`` for a Name/Attribute chain, else empty."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head else ""
    return ""


def string_literal(node: cst.BaseExpression | None) -> str | None:
    """The text of a string literal (plain or implicitly concatenated), else None."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


@dataclass(frozen=True, slots=True)
class LocalImport:
    path: str
    """Repo-relative file the import resolves to."""
    names: tuple[str, ...]
    """Names taken from it (``from m import a, b``); empty for ``import m``."""


def local_imports(repo: Path, rel: str, module: cst.Module) -> list[LocalImport]:
    """Imports in ``rel`` that resolve to files of this repo (next to ``rel`` or at the repo root)."""
    here = (repo / rel).parent
    out: list[LocalImport] = []

    def resolve(dotted_name: str, level: int) -> str | None:
        bases = [here] if level else [here, repo]
        for _ in range(max(level - 1, 0)):
            bases = [bases[0].parent]
        parts = dotted_name.split(".") if dotted_name else []
        for base in bases:
            for candidate in (base.joinpath(*parts).with_suffix(".py") if parts else None,
                              base.joinpath(*parts, "__init__.py")):
                if candidate is not None and candidate.is_file():
                    try:
                        return candidate.resolve().relative_to(repo.resolve()).as_posix()
                    except ValueError:
                        return None
        return None

    for node in walk(module):
        if isinstance(node, cst.Import):
            for alias in node.names:
                found = resolve(dotted(alias.name), 0)
                if found:
                    out.append(LocalImport(found, ()))
        elif isinstance(node, cst.ImportFrom):
            level = len(node.relative)
            found = resolve(dotted(node.module) if node.module else "", level)
            if found and not isinstance(node.names, cst.ImportStar):
                out.append(LocalImport(found, tuple(dotted(a.name) for a in node.names)))
            elif found:
                out.append(LocalImport(found, ()))
    return out


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node``, depth first, ``node`` included."""
    yield node
    for child in node.children:
        yield from walk(child)


class ParsedFile:
    """One parsed file with positions, for ``file:line`` sources."""

    def __init__(self, rel: str, wrapper: MetadataWrapper):
        self.rel = rel
        self.module = wrapper.module
        self.positions = wrapper.resolve(PositionProvider)

    def where(self, node: cst.CSTNode) -> str:
        return f"{self.rel}:{self.positions[node].start.line}"

    def literal(self, node: cst.BaseExpression) -> tuple[bool, object]:
        return literal(self.module, node)
