"""`infrarsi apply --dry-run`, `infrarsi report` and `infrarsi bank show` on an 80-column terminal,
rendered from values built here (no trials, no bank, no git)."""

from __future__ import annotations

import argparse
import math
import re
from datetime import UTC, datetime
from io import StringIO

import pytest
from rich.console import Console

from infrarsi.bank.inspect import ShowResult, WorkloadView
from infrarsi.bank.store import StoredEffect, StoredRun
from infrarsi.cli import apply as apply_cli
from infrarsi.cli import bank as bank_cli
from infrarsi.cli import report as report_cli
from infrarsi.cli.fit import MIN_WRAP, longest_word
from infrarsi.records import MemoryPriceRow, PatchCheck, PriorCheckRow
from infrarsi.report import tables
from infrarsi.report.model import Audit, HunkLine, Report, Side, StatusCost, TrialLine
from infrarsi.stages.apply import ApplyResult, ApplyStatus

CHECKPOINTING = "patch:activation_checkpointing"
LONG_LINE = ("+        y = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False, preserve_rng_state=True)"
             "  # saves activations")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def out(monkeypatch) -> Console:
    """The console every command module prints to, 80 columns wide, no colour (as when piped)."""
    console = Console(width=80, file=StringIO(), color_system=None, highlight=False)
    for module in (apply_cli, bank_cli, report_cli):
        monkeypatch.setattr(module, "console", console)
    return console


def lines(out: Console) -> list[str]:
    return [line.rstrip() for line in ANSI.sub("", out.file.getvalue()).splitlines()]


def test_apply_dry_run_prints_every_diff_line_whole_and_the_evidence_wrapped_at_words(out, monkeypatch):
    assert len(LONG_LINE) > 100
    diff = f"--- a/model.py\n+++ b/model.py\n@@ -9 +9 @@\n-        y = block(x)\n{LONG_LINE}\n"
    message = ("infrarsi: 1.23x faster training job (95% CI 1.10-1.30x)\n\nEvidence:\n  job-time speedup 1.234x at "
               "1000 steps, 95% CI [1.100, 1.300] over 3 interleaved rounds of whole processes timed by InfraRSI\n")
    result = ApplyResult(status=ApplyStatus.DRY_RUN, message="dry run: nothing written", diff=diff,
                         commit_message=message)
    monkeypatch.setattr(apply_cli, "apply", lambda *a, **kw: result)
    assert apply_cli.main(argparse.Namespace(path=".", candidate=None, dry_run=True, json=False)) == 0
    text = lines(out)
    assert text[:5] == diff.splitlines()
    panel = text[5:]
    assert all(len(line) <= 80 for line in panel) and "dry run: nothing written" in panel[0]
    assert " ".join(line.strip("╭╰│─ ") for line in panel[1:-1]).split() == message.split()


def _report() -> Report:
    side = Side(step_s=0.412, tokens_per_s=4971.0, mfu=0.31, peak_bytes=3 * 2**30, job_s=420.0, runs=3,
                source="3 interleaved reruns")
    setting = "micro_batch_size=8, +activation_checkpointing"
    audit = Audit(setting=setting, candidate={}, promoted=True, cleared=True, reason="fastest of those that cleared",
                  job_speedup=(1.23, 1.10, 1.30), step_speedup=(1.25, 1.12, 1.31), record_step_speedup=(1.24, 1.1, 1.3),
                  max_loss_diff=1e-6, trial=7, paths=["model.py"],
                  hunks=[HunkLine(path="model.py", header="@@ -9 +9 @@", text=f"-        y = block(x)\n{LONG_LINE}\n")],
                  command="python train.py --micro_batch_size=8", source_settings={},
                  patches=["activation_checkpointing"])
    endings = [("ok", ""), ("oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")]
    trials = [TrialLine(number=n, kind="search", status=status, setting=setting, step_s=0.41, peak_bytes=2**31,
                        wall_s=30.0, start_s=30.0 * n, reason="expected 18% faster by the datasheet prior",
                        detail=detail) for n, (status, detail) in enumerate(endings)]
    priors = [PriorCheckRow(key=CHECKPOINTING, quantity="time", prior_mean=math.log(1.2), prior_sd=0.05,
                        observed=math.log(0.9), observed_sd=0.02, n_trials=4, miscalibrated=True,
                        source="3 trial(s) on this machine, run noise unknown, read no surer than its trials"),
                PriorCheckRow(key="optimizer_implementation=fused", quantity="memory", prior_mean=0.0, prior_sd=0.1,
                          observed=0.01, observed_sd=0.02, n_trials=2, miscalibrated=False, source="datasheet")]
    return Report(repo="/home/me/gpt", run_id="abc123", run_status="ok", run_message="promoted: 1.23x faster",
                  sampler="tpe", sandbox="bubblewrap", started="2026-01-05", priors_source="datasheet",
                  hardware="NVIDIA H100", device="cuda", budget_bytes=80 * 2**30, tokens_per_step=2048,
                  planned_steps=1000, noise_floor=1.05, promotion_floor=1.02, peak_flops="", baseline=side,
                  promoted=side, job_speedup=(1.23, 1.10, 1.30), step_speedup=(1.25, 1.12, 1.31), trials=trials,
                  by_status=[StatusCost(status="ok", trials=1, wall_s=30.0), StatusCost(status="oom", trials=1,
                                                                                       wall_s=30.0)],
                  search_ended="the budget", spent_s=60.0, interrupted_s=0.0, failed_s=30.0,
                  patch_checks=[PatchCheck(name="activation_checkpointing", status="validated", reason="", cost_s=9.0)],
                  audits=[audit], memory_prices=[MemoryPriceRow(key=CHECKPOINTING, log_effect=-0.3, log_sd=0.05,
                                                                pct=-26.0, bytes_at_baseline=2**31)],
                  prior_checks=priors)


def test_report_at_80_columns_shows_every_table_whole(out):
    report = _report()
    report_cli.render(report)
    text = lines(out)
    assert LONG_LINE in text  # the diff: whole, the terminal wraps it
    assert all(len(line) <= 80 for line in text if line != LONG_LINE)
    assert text[text.index("Baseline against promoted") + 1].startswith("┏")
    for table in tables.all_tables(report):  # those drawn: no word broken, no wrapped column under MIN_WRAP
        at = text.index(table.title)
        if text[at + 1].startswith("┏"):
            widths = [len(part) - 2 for part in text[at + 1].strip("┏┓").split("┳")]
            for width, column in zip(widths, zip(table.columns, *table.rows, strict=False), strict=False):
                assert width >= max(map(longest_word, column)) and width >= min(max(map(len, column)), MIN_WRAP)
    # "Prior against observed effect" is too wide: label-value blocks, names and the source sentence whole.
    start = text.index("Prior against observed effect")
    blocks = text[start:start + 20]
    assert "  setting     " + CHECKPOINTING in blocks and "  setting     optimizer_implementation=fused" in blocks
    assert any("✗ miscalibrated" in line for line in blocks)
    source = " ".join(line[14:] for line in blocks if line.startswith(("  prior from", " " * 14)))
    assert "3 trial(s) on this machine, run noise unknown, read no surer than its trials" in source
    assert "OutOfMemoryError:" in "\n".join(text)


def test_report_verbose_keeps_the_wide_tables(out):
    report_cli.render(_report(), verbose=True)
    text = lines(out)
    at = text.index("Prior against observed effect")
    assert text[at + 1].startswith("┏")


def test_bank_show_at_80_columns_keeps_setting_names_whole_beside_their_ids(out):
    names = ["micro_batch_size=8", "optimizer_implementation=fused", CHECKPOINTING]
    effects = [StoredEffect(id=40 + i, key=key, baseline="4", time_log=-0.2, time_sd=0.01, n=3, noise_cv=None,
                            trusted_sd=0.2) for i, key in enumerate(names)]
    run = StoredRun(id="0f3a9c", signature="dense/p7/t14/s10/cuda/torchrun", hardware_id="h100x8",
                    hardware="8x NVIDIA H100 80GB HBM3", recorded_at=datetime(2026, 1, 5, tzinfo=UTC),
                    effects=effects, verdicts=[], best=[])
    view = WorkloadView(repo="/home/me/gpt", signature=run.signature, hardware_id="h100x8", similarity={run.id: 1.0},
                        priors=[{"key": key, "factor": 0.82, "low": 0.67, "high": 1.0, "sd": 0.2,
                                 "source": "3 trial(s) on this machine, run noise unknown"} for key in names])
    bank_cli.render(ShowResult(status="ok", message="1 run(s), 3 finding(s)", url="sqlite:///bank.db", runs=[run],
                               workload=view))
    text = lines(out)
    assert all(len(line) <= 80 for line in text) and "…" not in "\n".join(text)
    for effect in effects:
        at = text.index(f"  id                      {effect.id}")
        assert text[at + 1] == f"  setting                 {effect.key}"
    # The workload's priors fit as a table: each name on one line, its sentence wrapped at words.
    assert all(any(f"│ {name} " in line for line in text) for name in names)
