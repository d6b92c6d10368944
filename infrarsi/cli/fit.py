"""Output that reads whole at any terminal width, 80 columns included.

A table is drawn only where every column keeps its longest word whole and no column that wraps
a cell is narrower than MIN_WRAP; otherwise each row becomes a block of label-value lines. Text
with a word wider than the room it would get (a diff line, a long path) is printed with soft
wrap: the terminal wraps it, rich never cuts it.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

MIN_WRAP = 12
"""The narrowest a column may be when it wraps a cell: narrower reads as a word per line."""
INDENT = 2
GAP = 2

Cell = str | Text


def _text(cell: Cell) -> Text:
    """A cell as Text: plain strings are shown as written, never parsed as rich markup."""
    return cell if isinstance(cell, Text) else Text(cell)


def _width(cell: Cell) -> int:
    return max((cell_len(line) for line in _text(cell).plain.splitlines()), default=0)


def longest_word(cell: Cell) -> int:
    """The narrowest a cell can be wrapped without breaking a word (rich wraps at whitespace only)."""
    return max((cell_len(word) for word in _text(cell).plain.split()), default=0)


def column_widths(columns: Sequence[Cell], rows: Sequence[Sequence[Cell]], room: int) -> list[int] | None:
    """Content widths summing to at most ``room``, or None when no such widths keep every word
    whole with no wrapped column under MIN_WRAP. Narrows the widest column first, as rich does,
    but never below its floor (rich's own narrowing breaks words, and cuts with overflow="ellipsis")."""
    cells = list(zip(columns, *rows, strict=False))
    widths = [max(map(_width, column)) for column in cells]
    floors = [max(max(map(longest_word, column)), min(width, MIN_WRAP))
              for column, width in zip(cells, widths, strict=True)]
    if sum(floors) > room:
        return None
    while sum(widths) > room:
        widest = max(range(len(widths)), key=lambda i: widths[i] if widths[i] > floors[i] else -1)
        widths[widest] -= 1
    return widths


def print_indented(out: Console, cell: Cell, indent: int = 0) -> None:
    """Wrapped at words below ``indent``; a word wider than that room is left to the terminal to wrap."""
    if indent + longest_word(cell) <= out.width:
        out.print(Padding(_text(cell), (0, 0, 0, indent)))
    else:
        out.print(Text(" " * indent) + _text(cell), soft_wrap=True)


def print_table(out: Console, title: str, columns: Sequence[str], rows: Sequence[Sequence[Cell]], *,
                wide: bool = False) -> None:
    """A table where it fits ``out`` (always with ``wide``), else one label-value block per row."""
    print_indented(out, Text(title, style="bold"))
    # Rich's default box draws n + 1 rules and pads every cell by one space each side.
    widths = column_widths(columns, rows, out.width - 3 * len(columns) - 1)
    if widths is None and not wide:
        _print_blocks(out, columns, rows)
        return
    table = Table()
    for i, column in enumerate(columns):
        table.add_column(_text(column), width=widths[i] if widths else None, overflow="fold")
    for row in rows:
        table.add_row(*map(_text, row))
    out.print(table)


def _print_blocks(out: Console, columns: Sequence[str], rows: Sequence[Sequence[Cell]]) -> None:
    """Each row as its labelled values, beside their labels where the longest word fits there,
    else below them; empty values are left out, a blank line between rows."""
    label_width = max(map(_width, columns))
    value_width = out.width - INDENT - label_width - GAP
    beside = value_width >= max([MIN_WRAP, *(longest_word(cell) for row in rows for cell in row)])
    for n, row in enumerate(rows):
        if n:
            out.print()
        fields = [(Text(label, style="dim"), _text(value))
                  for label, value in zip(columns, row, strict=False) if _text(value).plain]
        if beside:
            grid = Table.grid(padding=(0, GAP, 0, 0))
            grid.add_column(width=label_width, no_wrap=True)
            grid.add_column(width=value_width, overflow="fold")
            for label, value in fields:
                grid.add_row(label, value)
            out.print(Padding(grid, (0, 0, 0, INDENT)))
        else:
            for label, value in fields:
                if label.plain:
                    print_indented(out, label, INDENT)
                print_indented(out, value, 2 * INDENT)


def print_diff(out: Console, diff: str) -> None:
    """Every line whole: highlighted where the terminal has colour, wrapped only by the terminal."""
    text = Syntax(diff, "diff", theme="ansi_dark", background_color="default").highlight(diff)
    text.rstrip()
    out.print(text, soft_wrap=True)


def print_framed(out: Console, text: str, title: str) -> None:
    """``text`` in a panel wrapped at words, each line's continuation under its own indent; without
    the frame where a word (or the title) would not fit inside it."""
    lines = text.rstrip().splitlines()
    indents = [len(line) - len(line.lstrip()) for line in lines]
    # Inside the frame: its two rules and a space each side; the title, with a space each side, in the top rule.
    widest = max([cell_len(title) + 2, *(i + longest_word(line) for i, line in zip(indents, lines, strict=True))])
    if widest + 4 <= out.width:
        body = Group(*(Padding(Text(line.lstrip()), (0, 0, 0, i)) for i, line in zip(indents, lines, strict=True)))
        out.print(Panel(body, title=Text(title), expand=False))
        return
    print_indented(out, Text(title, style="bold"))
    for indent, line in zip(indents, lines, strict=True):
        print_indented(out, line.lstrip(), indent)
