"""What `optimize` prints when it is done: the outcome first, then a summary that fits the terminal.

A person (or a CI log) reads the first lines: promoted or not, by how much with its interval,
the command that reproduces it, where the report and the branch are. The long tables (every
trial, prior against observed, memory prices) are in the report, or here with ``--verbose``.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from infrarsi.events import clock
from infrarsi.report import formatting
from infrarsi.report.disturbance import words as disturbance_words
from infrarsi.report.model import Audit, Report, Side
from infrarsi.stages.apply import ApplyResult

if TYPE_CHECKING:
    from infrarsi.stages.optimize import OptimizeResult

MIN_WIDTH = 40


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=False, break_on_hyphens=False) or [indent]


def _command(command: str, width: int) -> list[str]:
    """A shell command cut at spaces into ``\\``-continued lines, each within ``width``."""
    lines = textwrap.wrap(command, width=width - 4, break_long_words=False, break_on_hyphens=False)
    return [f"  {line} \\" if i < len(lines) - 1 else f"  {line}" for i, line in enumerate(lines)]


def _side(side: Side) -> str:
    of = f" of the {side.mfu_dtype} peak" if side.mfu_dtype else ""
    mfu = f", MFU {formatting.percent(side.mfu)}{of}" if side.mfu is not None else ""
    return f"{formatting.seconds(side.step_s)} a step, peak {formatting.memory(side.peak_bytes)}{mfu}"


def _cost(r: Report) -> str:
    search, doctor, verification = (r.cost((stage,)) for stage in ("search", "doctor", "verification"))
    return (f"Cost: search {search.launches} launches, {clock(search.wall_s)}; proof {doctor.launches + verification.launches} "
            f"launches, {clock(doctor.wall_s + verification.wall_s)} (doctor {doctor.launches}, "
            f"{clock(doctor.wall_s)}; verification {verification.launches}, {clock(verification.wall_s)}).")


def _trials(r: Report) -> str:
    counts = ", ".join(f"{s.trials} {s.status}" for s in sorted(r.by_status, key=lambda s: -s.trials))
    failed = f"; {clock(r.failed_s)} on trials that did not end ok" if r.failed_s >= 1 else ""
    return f"Trials: {len(r.trials)} in {clock(r.spent_s)} ({counts}){failed}. Search ended: {r.search_ended}."


def _reproduce(audit: Audit, applied: ApplyResult | None, repo: str, width: int) -> list[str]:
    """The command that runs the promoted configuration, and where: the owner's checkout, or the
    branch apply commits when settings or patches live in the source (the command alone would run
    the baseline's source)."""
    if not audit.in_source:
        head = "Reproduce:"
    elif applied is not None and applied.status == "committed":
        head = f"Reproduce, on branch {applied.branch}:"
    else:
        head = f"Reproduce, after `infrarsi apply {repo}` writes {', '.join(audit.in_source)} into the source:"
    # The heading's lines start at the margin: only the command's lines are indented, to copy.
    return [*textwrap.wrap(head, width=width, break_long_words=False, break_on_hyphens=False),
            *_command(audit.command, width)]


def lines(result: OptimizeResult, width: int, repo: str) -> list[str]:
    """The outcome and the compact summary of an OptimizeResult, as plain lines of at most ``width``."""
    width = max(MIN_WIDTH, width)
    report: Report | None = result.report.report if result.report is not None and result.report.status == "ok" else None
    audit = report.promoted_audit if report is not None else None
    out: list[str] = []
    if report is not None and audit is not None and report.job_speedup is not None:
        point, low, high = report.job_speedup
        out += _wrap(f"Promoted: {audit.setting}", width)
        job = (f", job {formatting.seconds(report.baseline.job_s)} -> {formatting.seconds(report.promoted.job_s)}"
               if report.promoted is not None and report.baseline.job_s and report.promoted.job_s else "")
        out += _wrap(f"{point:.2f}x faster (95% CI {low:.2f}-{high:.2f}x){job}", width, "  ")
        if report.step_speedup is not None:
            step, planned = report.step_speedup[0], report.planned_steps
            out += _wrap(f"{step:.2f}x a step; {point:.2f}x the whole {planned}-step job with start-up "
                         "(whole processes)", width, "  ")
        out += _reproduce(audit, result.apply, repo, width)
    else:
        why = result.run.message if result.run is not None else result.message
        out += _wrap(f"Not promoted: {why}", width)
        if report is not None and report.no_promotion is not None:
            reasons = report.no_promotion  # its trials by status are the summary's Trials line
            for line in (reasons.best, f"Likely reason: {reasons.reason}", f"Next: {reasons.next_step}"):
                out += _wrap(line, width, "  ")
    if result.apply is not None:
        applied = (f"Committed on branch {result.apply.branch} ({result.apply.commit[:10]})"
                   if result.apply.status == "committed" else f"Apply: {result.apply.message}")
        out += _wrap(applied, width)
        if result.apply.flags:
            out += _wrap("Pass on the command line: " + " ".join(result.apply.flags), width, "  ")
    if result.report is not None and result.report.paths:
        out += _wrap(f"Report: {result.report.paths[0]}", width)
    if report is None:
        return out
    out.append("")
    base, best = report.baseline, report.promoted
    out += _wrap(f"Baseline: {_side(base)}" + (f"; promoted: {_side(best)}" if best is not None else ""), width)
    if report.machine_peak:
        shown = [f"{name} {formatting.percent(side.machine_mfu)}" for name, side in (("baseline", base), ("promoted", best))
                 if side is not None]
        out += _wrap(f"MFU of the machine's peak ({report.machine_peak}), beside the job's own: {', '.join(shown)}",
                     width)
    out += _wrap(_trials(report), width)
    if report.costs:
        out += _wrap(_cost(report), width)
    disturbance = result.run.disturbance if result.run is not None else None
    if disturbance is not None and (disturbance.trials or disturbance.waited_s or disturbance.background.busy):
        for line in disturbance_words(disturbance, list_reruns=False):  # a quiet run says nothing here; the report says it was quiet
            out += _wrap(f"Interference: {line}", width)
    for audit in report.audits:
        if not audit.promoted:
            verdict = "cleared the floor" if audit.cleared else "not promoted"
            out += _wrap(f"Also verified: {audit.setting}: {formatting.interval(audit.job_speedup)}, {verdict}", width)
    for note in report.notes:
        out += _wrap(f"Caveat: {note}", width)
    out += _wrap(f"Every trial, prior and price: infrarsi report {repo} (or optimize --verbose).", width)
    return out
