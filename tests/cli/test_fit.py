"""infrarsi/cli/fit.py: tables that fit 80 columns or turn into label-value blocks, diffs never cut."""

from __future__ import annotations

import re
from io import StringIO

from rich.console import Console

from infrarsi.cli.fit import MIN_WRAP, column_widths, longest_word, print_diff, print_framed, print_table

LONG_NAME = "patch:activation_checkpointing"
SENTENCE = "3 trial(s) on this machine, run noise unknown, from the bank's findings of two earlier runs"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def narrow(**kw) -> Console:
    return Console(width=80, file=StringIO(), color_system=None, highlight=False, **kw)


def lines(out: Console) -> list[str]:
    return [line.rstrip() for line in ANSI.sub("", out.file.getvalue()).splitlines()]


def drawn_widths(text: list[str]) -> list[int]:
    """Content widths of a rich table's columns, read off its top rule (one space of padding each side)."""
    top = next(line for line in text if line.startswith("┏"))
    return [len(part) - 2 for part in top.strip("┏┓").split("┳")]


def test_a_table_that_fits_keeps_names_whole_and_wraps_no_column_below_the_floor():
    out = narrow()
    columns = ["setting", "bank prior (± 1 sd)", "from"]
    rows = [[LONG_NAME, "×0.95 [0.90, 1.00]", SENTENCE], ["threads=1", "×11.93 [11.81, 12.05]", "datasheet"]]
    print_table(out, "priors", columns, rows)
    text = lines(out)
    assert all(len(line) <= 80 for line in text)
    assert any(LONG_NAME in line for line in text)  # a table, the name on one line
    for width, column in zip(drawn_widths(text), zip(columns, *rows, strict=True), strict=False):
        natural = max(len(cell) for cell in column)
        assert width >= max(map(longest_word, column)) and width >= min(natural, MIN_WRAP)
    assert drawn_widths(text)[2] < len(SENTENCE)  # the sentence did wrap, at words
    assert "run noise" in "\n".join(text) and "unknown," in "\n".join(text)


def test_a_table_too_wide_becomes_one_block_per_row():
    out = narrow()
    columns = ["id", "setting", "recorded", "read as today (± 1 sd)", "trials", "run noise CV"]
    rows = [["17", LONG_NAME, "×1.15 [1.14, 1.16]", "×1.15 [0.98, 1.35]", "3", "unknown"],
            ["18", "micro_batch_size=8", "×0.74 [0.72, 0.76]", "×0.74 [0.60, 0.91]", "4", "1.0%"],
            ["19", "optimizer_implementation=fused", "×0.90 [0.89, 0.91]", "×0.90 [0.80, 1.01]", "2", "2.0%"]]
    print_table(out, "run abc: 2026-01-05 00:00 UTC", columns, rows)
    text = lines(out)
    assert all(len(line) <= 80 for line in text)
    assert not any(line.startswith(("┏", "│")) for line in text)
    for row in rows:  # each id on the line above its name, both whole
        at = next(i for i, line in enumerate(text) if line.split() == ["id", row[0]])
        assert text[at + 1].split() == ["setting", row[1]]
    # Values start in one column, at least MIN_WRAP wide.
    starts = {line.index(value) for line in text for value in ("×1.15 [1.14, 1.16]", "unknown") if value in line}
    assert len(starts) == 1 and 80 - starts.pop() >= MIN_WRAP


def test_wide_keeps_the_table():
    out = narrow()
    print_table(out, "t", ["a", "b", "c", "d", "e", "f"], [[LONG_NAME] * 6], wide=True)
    assert any(line.startswith("┏") for line in lines(out))


def test_widths_floor_at_the_longest_word_and_min_wrap():
    assert column_widths(["h"], [["x" * 40]], 39) is None  # one word: never broken
    assert column_widths(["h"], [["word " * 10]], 11) is None  # a wrapped cell: never below MIN_WRAP
    assert column_widths(["h"], [["word " * 10]], 12) == [12]
    assert column_widths(["a", "b"], [["x" * 10, "y " * 20]], 30) == [10, 20]  # the widest narrows first
    assert column_widths(["n"], [["42"]], 5) == [2]  # a short cell needs no MIN_WRAP


def test_a_value_with_a_word_wider_than_its_place_goes_below_its_label_whole():
    out = narrow()
    path = "/data/" + "x" * 90
    print_table(out, "t", ["setting", "detail", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j"],
                [[LONG_NAME, path, *"abcdefghij"]])
    text = lines(out)
    assert "    " + path in text and "  setting" in text and "    " + LONG_NAME in text


def test_a_diff_line_wider_than_the_terminal_is_printed_whole():
    line = "+    model = torch.compile(model, mode='max-autotune', fullgraph=True)  # " + "x" * 80
    assert len(line) >= 150
    diff = f"--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-    model = model\n{line}\n"
    plain = narrow()
    print_diff(plain, diff)
    assert line in lines(plain) and "\x1b" not in plain.file.getvalue()
    coloured = Console(width=80, file=StringIO(), force_terminal=True, color_system="standard")
    print_diff(coloured, diff)
    assert "\x1b[" in coloured.file.getvalue() and line in lines(coloured)


def test_a_frame_wraps_at_words_under_each_lines_indent():
    out = narrow()
    message = ("Evidence:\n  job-time speedup 1.234x at 1000 steps, 95% CI [1.100, 1.300] over 3 interleaved rounds "
               "of whole processes timed by InfraRSI (promotion floor 1.020)\n")
    print_framed(out, message, "dry run: nothing written")
    text = lines(out)
    assert all(len(line) <= 80 for line in text) and text[0].startswith("╭") and "dry run: nothing written" in text[0]
    body = [line.strip("│ ") for line in text[1:-1]]
    assert " ".join(body).split() == message.split()  # every word whole, none cut
    assert all(line.startswith("│   ") for line in text[3:-1])  # continuations keep the evidence's indent


def test_a_word_too_wide_for_the_frame_drops_the_frame_not_the_word():
    out = narrow()
    flags = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.8,max_split_size_mb:512"
    print_framed(out, f"Pass on the command line:\n  {flags}\n", "committed")
    assert "  " + flags in lines(out) and not any("╭" in line for line in lines(out))
    titled = narrow()
    title = "committed 0123456789 on branch infrarsi/20261130-093015-a3f1-with-a-long-name"
    print_framed(titled, "short", title)
    assert lines(titled)[0] == title  # a title too long for the top rule: whole, unframed
