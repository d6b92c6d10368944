"""The report as a sequence of blocks (headings, text, tables, plots, code), so report.md and
report.html hold the same content in the same order and differ only in markup."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infrarsi.report import tables
from infrarsi.report.model import Audit, Report


@dataclass(frozen=True, slots=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Items:
    items: list[str]


@dataclass(frozen=True, slots=True)
class TableBlock:
    table: tables.Table


@dataclass(frozen=True, slots=True)
class Plot:
    path: Path
    alt: str


@dataclass(frozen=True, slots=True)
class Code:
    text: str
    lang: str = ""


Block = Heading | Text | Items | TableBlock | Plot | Code


def reproduce_blocks(audit: Audit, repo: str) -> list[Block]:
    if audit.in_source:
        # The command alone would run the baseline's source: say what must be written first.
        return [Text(f"After `infrarsi apply {repo}` writes {', '.join(audit.in_source)} into the source "
                     "(a commit on a new branch), on that branch:"), Code(audit.command, "sh")]
    blocks: list[Block] = [Code(audit.command, "sh")]
    if audit.trial is not None:
        blocks.append(Text(f"Commit it for review with `infrarsi apply {repo} --candidate {audit.trial}`."))
    return blocks


def no_promotion_blocks(report: Report) -> list[Block]:
    if report.no_promotion is None:
        return []
    return [Heading("Why nothing was promoted"), Items(report.no_promotion.lines())]


def change_blocks(audit: Audit) -> list[Block]:
    title = f"{audit.setting} ({tables.verdict_word(audit)})"
    blocks: list[Block] = [Heading(title, 3)]
    if not audit.hunks:
        blocks.append(Text("No source change: launch settings only." if audit.trial is not None
                           else "No trial of this candidate was found in the study: its changes cannot be shown."))
        return blocks
    hunks = f"{len(audit.hunks)} hunk{'s' if len(audit.hunks) > 1 else ''}"
    blocks.append(Text(f"Touches {', '.join(f'`{p}`' for p in audit.paths)}: {hunks}, as trial {audit.trial} ran it."))
    for path in audit.paths:
        # Hunk headers are stored without their newline; hunk bodies end with one.
        body = "".join(f"{h.header}\n{h.text}" for h in audit.hunks if h.path == path)
        blocks.append(Code(f"--- a/{path}\n+++ b/{path}\n{body}", "diff"))
    return blocks


def blocks(report: Report, plots: dict[str, Path]) -> list[Block]:
    out: list[Block] = [
        Heading(f"InfraRSI report: {report.repo}", 1),
        Items([
            f"run {report.run_id} ({report.sampler} sampler, started {report.started}): {report.run_status}"
            + (f", {report.run_message}" if report.run_message else ""),
            f"hardware: {report.hardware}; memory budget {tables.formatting.memory(report.budget_bytes)} ({report.device})",
            f"{report.tokens_per_step:,} tokens per step; the job runs {report.planned_steps:,} steps"
            + (f" ({report.planned_from})" if report.planned_from else ""),
            f"priors from {report.priors_source or 'unknown'}",
            f"trials sandboxed: {report.sandbox}",
        ]),
    ]
    if report.notes:
        out += [Heading("Caveats"), Items(report.notes)]
    if report.interference:
        out += [Heading("Other processes on the machine"), Items(report.interference)]

    def table(t: tables.Table) -> list[Block]:
        section: list[Block] = [Heading(t.title), TableBlock(t)]
        return [*section, Text(t.caption)] if t.caption else section

    out += table(tables.comparison(report))
    out += no_promotion_blocks(report)
    promoted = report.promoted_audit
    if promoted is not None:
        out += [Heading("Reproduce the promoted configuration"), *reproduce_blocks(promoted, report.repo)]
    if report.audits:
        out += table(tables.verdicts(report))
        out.append(Heading("What each candidate changes"))
        for audit in report.audits:
            out += change_blocks(audit)
    out += table(tables.statuses(report))
    for name, alt in (("timeline", "trial timeline coloured by status"),
                      ("memory", "step time against peak memory with the budget and censored OOMs")):
        if name in plots:
            out.append(Plot(plots[name], alt))
    if report.memory_prices:
        out += table(tables.prices(report))
        if "prices" in plots:
            out.append(Plot(plots["prices"], "memory price per setting"))
    if report.prior_checks:
        out += table(tables.priors(report))
        if "priors" in plots:
            out.append(Plot(plots["priors"], "prior against observed effect per setting"))
    if report.bank_priors:
        out += table(tables.bank(report))
    if report.patch_checks:
        out += table(tables.patch_checks(report))
    if report.trials:
        out += table(tables.trials(report))
    return out
