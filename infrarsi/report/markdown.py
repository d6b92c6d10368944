"""report.md: the document's blocks as GitHub-flavoured Markdown; plots are linked PNG files."""

from __future__ import annotations

import os
import re
from pathlib import Path

from infrarsi.report.document import Block, Code, Heading, Items, Plot, TableBlock, Text
from infrarsi.report.tables import Table

_CODE_SPAN = re.compile(r"`[^`\n]+`")
# An underscore inside a word starts no emphasis (GFM): names like zero_grad stay readable.
_SPECIAL = re.compile(r"([\\`*\[\]<>#!|~]|(?<!\w)_|_(?!\w))")


def _inline(text: str) -> str:
    """``text`` as literal Markdown: every character that could start markup (a link, an image,
    HTML, emphasis, a heading) is escaped, except inside the `code spans` the document itself uses,
    where Markdown interprets nothing. Report text holds data (patch titles, reasons, paths)."""
    out, end = [], 0
    for span in _CODE_SPAN.finditer(text):
        out += [_SPECIAL.sub(r"\\\1", text[end:span.start()]), span.group()]
        end = span.end()
    out.append(_SPECIAL.sub(r"\\\1", text[end:]))
    return "".join(out)


def _cell(text: str) -> str:
    return _inline(text).replace("\n", " ")


def _table(table: Table) -> str:
    lines = ["| " + " | ".join(_cell(c) for c in table.columns) + " |",
             "|" + "|".join("---" for _ in table.columns) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in the text, so the text cannot close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def render(blocks: list[Block], directory: Path) -> str:
    """Markdown for ``blocks``; plot links are relative to ``directory``, where the file is written."""
    parts = []
    for block in blocks:
        match block:
            case Heading(text, level):
                parts.append("#" * level + " " + _cell(text))
            case Text(text):
                parts.append(_inline(text))
            case Items(items):
                parts.append("\n".join(f"- {_cell(item)}" for item in items))
            case TableBlock(table):
                parts.append(_table(table))
            case Plot(path, alt):
                parts.append(f"![{_cell(alt)}]({Path(os.path.relpath(path, directory)).as_posix()})")
            case Code(text, lang):
                fence = _fence(text)
                parts.append(f"{fence}{lang}\n{text.rstrip()}\n{fence}")
    return "\n\n".join(parts) + "\n"
