"""Core positions and rewrites as LSP types: libcst ranges to Ranges, new sources to TextEdits.

The core counts 1-based lines and code-point columns (libcst's CodeRange); LSP counts 0-based
lines and, by default, UTF-16 code units. Every conversion goes through the codec pygls
negotiated with the client.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace import PositionCodec

from infrarsi.patches import Site


def position(lines: Sequence[str], codec: PositionCodec, line0: int, column: int) -> types.Position:
    """0-based line, code-point column -> client units (clamped to the document)."""
    if line0 >= len(lines):
        return types.Position(line=len(lines), character=0)
    text = lines[line0].rstrip("\r\n")
    return types.Position(line=line0, character=codec.client_num_units(text[:column]))


def site_range(lines: Sequence[str], codec: PositionCodec, site: Site) -> types.Range:
    return types.Range(
        start=position(lines, codec, site.start_line - 1, site.start_col),
        end=position(lines, codec, site.end_line - 1, site.end_col),
    )


def line_range(lines: Sequence[str], codec: PositionCodec, first: int, last: int | None = None) -> types.Range:
    """Whole lines ``first``..``last`` (1-based, inclusive), without the final newline."""
    last = first if last is None else last
    end_text = lines[last - 1].rstrip("\r\n") if last - 1 < len(lines) else ""
    return types.Range(start=types.Position(line=first - 1, character=0),
                       end=types.Position(line=last - 1, character=codec.client_num_units(end_text)))


def text_edits(before: str, after: str, codec: PositionCodec) -> list[types.TextEdit]:
    """The smallest whole-line edits that turn ``before`` into ``after`` (non-overlapping, in order).

    Applying them yields exactly ``after``; a diff keeps the user's cursor and folds in place,
    which one full-document replacement would not.
    """
    old = before.splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    edits = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        edits.append(types.TextEdit(range=types.Range(start=_line_start(old, i1, codec), end=_line_start(old, i2, codec)),
                                    new_text="".join(new[j1:j2])))
    return edits


def _line_start(lines: list[str], index: int, codec: PositionCodec) -> types.Position:
    """The start of line ``index``; past a last line with no newline, that line's end."""
    if index < len(lines) or not lines or lines[-1].endswith(("\n", "\r")):
        return types.Position(line=index, character=0)
    return types.Position(line=len(lines) - 1, character=codec.client_num_units(lines[-1]))
