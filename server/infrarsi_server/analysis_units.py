"""A document cut into the pieces the analysis caches: each top-level definition, and the rest.

Patches that look inside one definition (attention in a class, an optimizer call in a function)
find the same sites in ``imports + that definition`` as in the whole file, so each definition is
analysed alone and its result reused for as long as its text and the file's imports stay the
same: an edit re-analyses the definitions it touched. Everything at top level that is not a
definition (imports, argparse, a script's training loop) is one more unit. Python's own ``ast``
does the cutting: it is fast, and it refuses too-deep input with an error instead of crashing.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass

_SURROGATE = re.compile("[\ud800-\udfff]")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True, slots=True)
class Unit:
    text: str
    """What is analysed: the file's top-level imports, then the unit's own lines."""
    lines: tuple[int, ...]
    """For each line of ``text`` (1-based, in order), its 1-based line in the document."""
    top_level: bool = False
    """The unit of the top-level statements that are not definitions."""
    whole: bool = False
    """The whole document, for the patches that need it; the training loop is in one of the other units."""

    @property
    def key(self) -> bytes:
        return digest(self.text)


@dataclass(frozen=True, slots=True)
class Cut:
    units: list[Unit]
    error: str = ""
    """Why the document could not be cut (then ``units`` is empty): a syntax error, or too deep."""
    too_deep: bool = False


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def clean(text: str) -> str:
    """Lone surrogates (a client may send them) as U+FFFD: the same length in code points and UTF-16."""
    return _SURROGATE.sub("\ufffd", text)


def cut(text: str) -> Cut:
    try:
        tree = ast.parse(text)
    except (RecursionError, MemoryError) as err:
        return Cut([], f"{type(err).__name__}", too_deep=True)
    except SyntaxError as err:
        deep = "too many nested" in str(err.msg) or "too complex" in str(err.msg)
        return Cut([], f"line {err.lineno}: {err.msg}", too_deep=deep)
    except ValueError as err:  # NUL bytes
        return Cut([], str(err))
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    imports: list[int] = []
    rest: list[int] = []
    definitions: list[list[int]] = []
    for stmt in tree.body:
        first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
        span = list(range(first, (stmt.end_lineno or stmt.lineno) + 1))
        if isinstance(stmt, _DEFINITIONS):
            definitions.append(span)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            imports.extend(n for n in span if n not in imports)
        else:
            rest.extend(n for n in span if n not in rest)
    head = _unit(lines, imports, top_level=True)
    units = [_unit(lines, sorted(set(imports) | set(rest)), top_level=True)] if rest else []
    units += [_unit(lines, imports + span) for span in definitions]
    return Cut(units if units else ([head] if imports else []))


def _unit(lines: list[str], numbers: list[int], top_level: bool = False) -> Unit:
    return Unit("".join(lines[n - 1] for n in numbers), tuple(numbers), top_level)
