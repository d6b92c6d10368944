"""The report's tables as plain rows of text, so Markdown, HTML and the terminal show the same thing."""

from __future__ import annotations

import math
from dataclasses import dataclass

from infrarsi.report import formatting
from infrarsi.report.model import INTERRUPTED, PROOF, Audit, Report, Side

MISCALIBRATED = "✗ miscalibrated"


@dataclass(frozen=True, slots=True)
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    caption: str = ""


def _last_line(detail: str, width: int = 160) -> str:
    """The line of a failure's detail that says what went wrong (a traceback's last line)."""
    lines = [line.strip() for line in detail.splitlines() if line.strip()]
    return lines[-1][-width:] if lines else ""


def _ratio(new: float | None, old: float | None) -> str:
    return formatting.ratio(new / old) if new and old else "–"


def _mfu(side: Side) -> str:
    """MFU with the precision of the peak it is of: ``20.9% of bf16``."""
    shown = formatting.percent(side.mfu)
    return f"{shown} of {side.mfu_dtype}" if side.mfu is not None and side.mfu_dtype else shown


def comparison(report: Report) -> Table:
    b, p = report.baseline, report.promoted
    none = Side(step_s=None, tokens_per_s=None, mfu=None, peak_bytes=None, job_s=None, runs=0, source="")
    q = p or none
    peak_change = "–"
    if p and p.peak_bytes and b.peak_bytes:
        peak_change = f"{p.peak_bytes / b.peak_bytes - 1:+.1%}"
    rows = [
        ["step time (median)", formatting.seconds(b.step_s), formatting.seconds(q.step_s),
         f"speedup {formatting.interval(report.step_speedup)}" if report.step_speedup else "–"],
        ["tokens/s", formatting.rate(b.tokens_per_s), formatting.rate(q.tokens_per_s), _ratio(q.tokens_per_s, b.tokens_per_s)],
        ["MFU", _mfu(b), _mfu(q), _ratio(q.mfu, b.mfu) if q.mfu_dtype == b.mfu_dtype else "–"],  # of other peaks
        ["peak memory", formatting.memory(b.peak_bytes), formatting.memory(q.peak_bytes), peak_change],
        [f"job ({report.planned_steps} steps + start-up)", formatting.seconds(b.job_s), formatting.seconds(q.job_s),
         f"speedup {formatting.interval(report.job_speedup)}" if report.job_speedup else "–"],
        ["runs", str(b.runs), str(q.runs) if p else "–", ""],
    ]
    caption = f"Baseline: {b.source}. " + (f"Promoted: {p.source}. " if p else "No candidate was promoted. ")
    caption += ("Speedups are baseline over candidate with a 95% confidence interval; "
                f"promoted only above {report.promotion_floor:.3f}× "
                f"(one run alone would need {report.noise_floor:.3f}×).")
    if report.peak_flops:
        caption += f" MFU against {report.peak_flops}; FLOPs per token are fixed by the contract."
    return Table("Baseline against promoted", ["", "baseline", "promoted", "change"], rows, caption)


def statuses(report: Report) -> Table:
    rows = []
    for s in report.by_status:
        share = f"{s.wall_s / report.spent_s:.0%}" if report.spent_s and s.status != INTERRUPTED else ""
        rows.append([s.status, str(s.trials) if s.status != INTERRUPTED else "–", f"{s.wall_s:.1f}", share])
    rows.append(["all failures", str(sum(s.trials for s in report.by_status if s.status != "ok")),
                 f"{report.failed_s:.1f}", f"{report.failed_s / report.spent_s:.0%}" if report.spent_s else ""])
    searched = sum(1 for t in report.trials if t.kind == "search")
    return Table("Trials by status and what they cost", ["status", "trials", "wall s", "share"], rows,
                 "Every trial that did not end ok is a failure; its wall time is its cost."
                 + (f" Interrupted trials left no result, only {report.interrupted_s:.1f} s." if report.interrupted_s
                    else "")
                 + (f" The search ended after {searched} search trials: {report.search_ended}." if report.search_ended
                    else ""))


def costs(report: Report) -> Table:
    rows = [[c.stage, str(c.launches), f"{c.wall_s:.1f}"] for c in report.costs]
    if not rows:
        return Table("What the answer cost", [], [])
    search, proof = report.cost(("search",)), report.cost(PROOF)
    rows.append(["proof (doctor + verification)", str(proof.launches), f"{proof.wall_s:.1f}"])
    ratio = f"{proof.wall_s / search.wall_s:.2f}x" if search.wall_s else "–"
    return Table("What the answer cost", ["stage", "launches", "wall s"], rows,
                 f"Whole processes launched and their wall time. Proving the answer took {ratio} the search's "
                 "time: doctor's baseline runs are verification's first baseline round, and verification "
                 "stops as soon as its intervals decide.")


def trials(report: Report) -> Table:
    rows = [[str(t.number), t.kind, t.status, t.setting, formatting.seconds(t.step_s), formatting.memory(t.peak_bytes),
             f"{t.wall_s:.1f}", t.reason if t.status == "ok" else _last_line(t.detail)]
            for t in report.trials]
    return Table("Every trial", ["#", "kind", "status", "setting", "step", "peak", "wall s", "why"], rows)


def verdict_word(audit: Audit) -> str:
    if audit.promoted:
        return "promoted"
    return "cleared, slower" if audit.cleared else "not promoted"


def verdicts(report: Report) -> Table:
    rows = [[a.setting, verdict_word(a), formatting.interval(a.job_speedup), formatting.interval(a.step_speedup),
             formatting.interval(a.record_step_speedup), "–" if a.max_loss_diff is None else f"{a.max_loss_diff:.2g}",
             a.reason]
            for a in report.audits]
    return Table("Re-verified candidates", ["candidate", "verdict", "job speedup (95% CI)", "per step",
                                            "per step by its records", "max |Δloss|", "reason"], rows,
                 "Job and per step: InfraRSI's clock over whole processes, launch to exit, at two lengths "
                 "(what decides). By its records: the job's own step records, shown beside them; a "
                 "candidate whose records tell another pace is refused.")


def prices(report: Report) -> Table:
    rows = [[p.key, f"{p.pct:+.1f}%", f"{100 * math.expm1(p.log_effect - p.log_sd):+.1f}% … "
             f"{100 * math.expm1(p.log_effect + p.log_sd):+.1f}%", formatting.memory(p.bytes_at_baseline)]
            for p in sorted(report.memory_prices, key=lambda p: p.pct)]
    return Table("Memory price per setting", ["setting", "peak change", "± 1 sd", "at the baseline's peak"], rows,
                 "From the censored (Tobit) fit of log peak memory over every trial; "
                 "OOMs count as peaks above the budget.")


def _factor(log_mean: float, log_sd: float) -> str:
    if not (math.isfinite(log_mean) and math.isfinite(log_sd)):
        return "no data"
    return f"×{math.exp(log_mean):.2f} [{math.exp(log_mean - log_sd):.2f}, {math.exp(log_mean + log_sd):.2f}]"


def priors(report: Report) -> Table:
    rows = [[c.key, c.quantity, _factor(c.prior_mean, c.prior_sd), _factor(c.observed, c.observed_sd),
             str(c.n_trials), MISCALIBRATED if c.miscalibrated else "consistent", c.source]
            for c in report.prior_checks]
    return Table("Prior against observed effect", ["setting", "on", "prior", "observed", "trials", "", "prior from"],
                 rows, "Multipliers of the baseline, ± 1 sd. A prior is miscalibrated when the observed effect lies "
                 "outside its ~95% band with enough data; it then stops steering the search.")


def bank(report: Report) -> Table:
    rows = [[b.key, _factor(b.bank_mean, b.bank_sd), _factor(b.used_mean, b.used_sd),
             _factor(b.observed, b.observed_sd) if b.observed is not None and b.observed_sd is not None else "not tried",
             str(b.n_trials),
             b.outcome, b.source] for b in report.bank_priors]
    return Table("Priors from the experience bank", ["setting", "bank said", "search started from", "this run",
                                                     "trials", "what this run made of it", "bank findings"],
                 rows, "Step-time multipliers of the baseline, ± 1 sd. A bank finding is read no surer than the "
                 "trials behind it and combined with the other priors; one this run's trials contradict stops "
                 "steering the search at once. `infrarsi bank show` lists the findings, `infrarsi bank forget` "
                 "deletes them.")


def patch_checks(report: Report) -> Table:
    rows = [[c.name, c.status, f"{c.cost_s:.1f}", _last_line(c.reason)] for c in report.patch_checks]
    return Table("Patch validation", ["patch", "status", "wall s", "detail"], rows)


def all_tables(report: Report) -> list[Table]:
    """In the order the documents show them; empty tables are left out."""
    tables = [comparison(report), verdicts(report), costs(report), statuses(report), prices(report), priors(report),
              bank(report), patch_checks(report), trials(report)]
    return [t for t in tables if t.rows]
