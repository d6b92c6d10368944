"""report.html: one self-contained file (inline CSS, plots as base64 data URIs, no external assets),
so it can be mailed, attached to a ticket or opened offline."""

from __future__ import annotations

import base64
import html
import re

from infrarsi.report.document import Block, Code, Heading, Items, Plot, TableBlock, Text
from infrarsi.report.tables import MISCALIBRATED, Table

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: .6em 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.bad { color: #c62828; font-weight: 600; }
p { color: #444; }
pre { background: #f7f7f7; padding: .6em; overflow-x: auto; font-size: 12.5px; }
pre .add { color: #1b5e20; background: #e8f5e9; } pre .del { color: #b71c1c; background: #ffebee; }
pre .hunk { color: #6a1b9a; }
img { max-width: 100%; display: block; margin: .8em 0; }
code { background: #f2f2f2; padding: 0 3px; }
"""


def _inline(text: str) -> str:
    """Escaped text with `code` spans."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    rows = []
    for row in table.rows:
        cells = "".join(f'<td class="bad">{html.escape(c)}</td>' if c == MISCALIBRATED else f"<td>{html.escape(c)}</td>"
                        for c in row)
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _diff_line(line: str) -> str:
    escaped = html.escape(line)
    if line.startswith("@@"):
        return f'<span class="hunk">{escaped}</span>'
    if line.startswith("+") and not line.startswith("+++"):
        return f'<span class="add">{escaped}</span>'
    if line.startswith("-") and not line.startswith("---"):
        return f'<span class="del">{escaped}</span>'
    return escaped


def _code(text: str, lang: str) -> str:
    lines = text.rstrip("\n").split("\n")
    body = "\n".join(_diff_line(line) for line in lines) if lang == "diff" else html.escape("\n".join(lines))
    return f"<pre><code>{body}</code></pre>"


def render(blocks: list[Block], title: str) -> str:
    parts = []
    for block in blocks:
        match block:
            case Heading(text, level):
                parts.append(f"<h{level}>{html.escape(text)}</h{level}>")
            case Text(text):
                parts.append(f"<p>{_inline(text)}</p>")
            case Items(items):
                parts.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
            case TableBlock(table):
                parts.append(_table(table))
            case Plot(path, alt):
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                parts.append(f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">')
            case Code(text, lang):
                parts.append(_code(text, lang))
    body = "\n".join(parts)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n")
