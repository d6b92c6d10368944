"""What `optimize` prints at the end, from a real run: the outcome first, every line within 80 columns."""

from __future__ import annotations

from pathlib import Path

from infrarsi.cli import outcome
from infrarsi.records import load_run
from infrarsi.stages.optimize import OptimizeResult
from infrarsi.stages.report import report


def reproduce_at(lines: list[str]) -> int:
    return lines.index("Reproduce:")


def test_outcome_first_and_compact_in_80_columns(ran: Path):
    run = load_run(ran)
    result = OptimizeResult(status=run.status, message=run.message, run=run, report=report(ran, formats=("md",)))
    lines = outcome.lines(result, 80, str(ran))
    # only a single word longer than the line (this test's deep temporary path) may overrun it
    assert [line for line in lines if len(line) > 80 and " " in line.strip()] == []
    promoted = result.report.report.promoted_audit
    if promoted is not None:
        assert lines[0].startswith("Promoted: ")
        assert any("faster (95% CI " in line for line in lines[1:reproduce_at(lines)])
        reproduce = reproduce_at(lines)
        assert lines[reproduce + 1].split()[0] == promoted.command.split()[0]
    else:
        assert lines[0].startswith("Not promoted: ")
    # a path longer than the line goes on a line of its own, whole: it stays one thing to copy
    joined = "\n".join(lines).replace("Report:\n  ", "Report: ")
    assert any(line.startswith("Report: ") and line.endswith("report.md") for line in joined.splitlines())
    assert any(line.startswith("Trials: ") for line in lines)
    assert len(lines) <= 25, "the long tables belong in the report (or --verbose)"
