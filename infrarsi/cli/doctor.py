"""`infrarsi doctor PATH [--repeats N] [--json]`: measure the baseline and say where the time goes."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table
from rich.text import Text

from infrarsi.byte_units import GIB
from infrarsi.cli.console import ProgressSink, add_sandbox_flag, add_wait_flag, console, emit_json, err
from infrarsi.records import DoctorReport, doctor_path
from infrarsi.stages.doctor import doctor

BAR_WIDTH = 30


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="run the baseline several times: noise, phases, memory, MFU, loss tolerance",
        description="Runs the contract's baseline N times as separate processes and measures its noise, "
        "phase split, peak memory, MFU and loss spread; writes .infrarsi/doctor.json and the reference "
        "losses into the contract.",
    )
    p.add_argument("path", nargs="?", default=".", type=Path, help="the repository (default: .)")
    p.add_argument("--repeats", type=_repeats, default=3, metavar="N", help="baseline runs (at least 2; default 3)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of the summary")
    add_sandbox_flag(p)
    add_wait_flag(p)
    p.set_defaults(func=run)


def _repeats(text: str) -> int:
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("at least 2 runs are needed to measure run-to-run noise")
    return value


def run(args: argparse.Namespace) -> int:
    with ProgressSink() as progress:
        done = doctor(args.path, repeats=args.repeats, on_event=progress, sandbox=args.sandbox,
                      wait_for_quiet=args.wait_for_quiet)
    if done.report is None:
        err(done.message)
        return 1
    if args.json:
        emit_json(done.report.to_dict())
    else:
        render(done.report, args.path)
    return 0


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def render(report: DoctorReport, repo: Path) -> None:
    """The summary: where the time goes, then the numbers later stages rely on."""
    console.print(f"[bold]doctor[/] {repo}  [dim]{report.hardware.describe()}[/]")

    phases = Table(title="Where the time goes", title_justify="left", box=None, pad_edge=False)
    phases.add_column("phase")
    phases.add_column("ms/step", justify="right")
    phases.add_column("share", justify="right")
    phases.add_column("")
    split = report.phases
    if split.phases:
        for name, share in split.shares().items():
            seconds = split.other_s if name == "other" else split.phases[name]
            bar = Text("█" * max(1, round(share * BAR_WIDTH)) if share > 0 else "", style="cyan")
            phases.add_row(name, f"{seconds * 1000:.1f}", f"{share:.0%}", bar)
        phases.add_row("[bold]step[/]", f"[bold]{split.step_s * 1000:.1f}[/]",
                       f"{split.coverage:.0%} timed", "")
        console.print(phases)
    else:
        console.print("[bold]Where the time goes[/]: the script reports no phases.")
    for line in report.findings:
        console.print(f"  {line}")

    n, eff, mem, loss = report.noise, report.efficiency, report.memory, report.losses
    table = Table(title=f"Baseline ({report.repeats} runs)", title_justify="left", box=None,
                  show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("step time", f"{n.step_s * 1000:.1f} ms median, run-to-run CV {n.run_to_run_cv:.1%}, "
                               f"within-run CV {n.within_run_cv:.1%}")
    table.add_row("noise floor", f"speedups below {n.min_speedup:.3f}× are not trusted "
                                 f"({n.confidence:.0%}, one run each)")
    if eff.tokens_per_step:
        table.add_row("throughput", f"{eff.tokens_per_s:,.0f} tokens/s ({eff.tokens_per_step:,} tokens/step)")
    elif eff.samples_per_s:
        table.add_row("throughput", f"{eff.samples_per_s:,.1f} samples/s ({eff.samples_per_step:,} samples/step)")
    if eff.mfu is not None and eff.peak is not None:
        devices = f" × {eff.devices}" if eff.devices > 1 else ""
        table.add_row("MFU", f"{eff.mfu:.1%} of {eff.peak.value / 1e9:,.1f} GFLOP/s{devices} {eff.peak.dtype} "
                             f"peak [dim]({eff.peak.source}; FLOPs: {eff.mfu_source})[/]")
    else:
        table.add_row("MFU", "[yellow]not available[/] (see warnings)")
    ranks = f", the largest of {mem.ranks} ranks against a per-rank budget" if mem.ranks > 1 else ""
    table.add_row("peak memory", f"{_gib(mem.peak_bytes)} of the {_gib(mem.budget_bytes)} budget "
                                 f"({mem.fraction:.0%}, {mem.device}{ranks})")
    table.add_row("job", f"{eff.projected_job_s / 60:.1f} min projected (start-up + planned steps)")
    table.add_row("loss", f"{loss.reference[0]:.4f} → {loss.reference[-1]:.4f} over {len(loss.reference)} "
                          f"steps; tolerance {loss.tolerance:.3g}, by-design {loss.numerics_tolerance:.3g}")
    if report.background is not None:
        bg = report.background
        table.add_row("background", f"other processes use {bg.idle_cores:.2f} of the job's {bg.cores} cores idle, "
                                    f"{bg.normal_cores:.2f} while it runs (90th pct); a trial above {bg.limit_cores:.2f} "
                                    "is disturbed and rerun" + (f"; waited {bg.waited_s:.0f} s for quiet" if bg.waited_s else ""))
    console.print(table)
    for claim in report.claims:
        if claim["role"] not in ("workload", "unknown"):
            style = {"confirmed": "green", "refuted": "red"}.get(claim["status"], "yellow")
            console.print(f"the model's claim [bold]{claim['name']}[/] is {claim['role']}: "
                          f"[{style}]{claim['status']}[/], {claim['why']}")
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    console.print(f"[dim]wrote {doctor_path(repo)} and the reference losses into the contract "
                  f"({report.wall_s:.0f} s)[/]")
