"""MFU in every report of a run whose FLOPs doctor counted: against the job's own peak and the
machine's (every core or GPU, its fastest dtype), for the baseline and the promoted side."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from infrarsi.cli import outcome
from infrarsi.datasheet import datasheet_peak
from infrarsi.records import DoctorReport
from infrarsi.report import document, markdown
from infrarsi.stages.optimize import OptimizeResult
from infrarsi.stages.report import ReportResult
from tests.report.values import DATA, REPO, candidate, contract, cpu_peak, doctor, report, row, run, verdict

FLOPS = 1.3e10
"""FLOPs per step as FlopCounterMode counted them through the launcher (no model facts: no per-token figure)."""


def counted(**efficiency) -> DoctorReport:
    return doctor(flops_per_token=None, flops_per_step=FLOPS, mfu_source="FlopCounterMode", **efficiency)


def promoted_run():
    return run([row(0, "baseline", "ok", 150.0)], [verdict(candidate(micro_batch=8), (1.2, 1.1, 1.3), promoted=True)])


def test_flops_counted_through_the_launcher_give_mfu_to_both_sides():
    r = report(promoted_run(), the_doctor=counted())
    peak = counted().efficiency.peak.value
    assert r.baseline.mfu == pytest.approx(FLOPS / r.baseline.step_s / peak)
    assert r.promoted.mfu == pytest.approx(FLOPS / r.promoted.step_s / peak)
    assert r.peak_flops.startswith("71.0 GFLOP/s fp32 (measured")
    assert r.machine_peak == "" and r.baseline.machine_mfu is None  # a doctor.json older than the machine's peak


def test_a_job_without_tokens_still_has_mfu():
    r = report(promoted_run(), contract(tokens_per_step=0), counted())
    assert r.baseline.tokens_per_s is None and r.baseline.mfu == pytest.approx(FLOPS / r.baseline.step_s / 71e9)


def test_mfu_against_the_machine_s_peak_beside_the_job_s(tmp_path):
    machine = cpu_peak(220e9, "bf16", threads=2)
    r = report(promoted_run(), the_doctor=counted(machine_peak=machine))
    assert r.baseline.machine_mfu == pytest.approx(FLOPS / r.baseline.step_s / 220e9)
    assert r.promoted.machine_mfu == pytest.approx(FLOPS / r.promoted.step_s / 220e9)
    assert r.machine_peak == "220.0 GFLOP/s bf16 on all 2 cores"
    shown = f"baseline {r.baseline.machine_mfu:.1%}, promoted {r.promoted.machine_mfu:.1%}"
    assert "against the machine's peak, 220.0 GFLOP/s bf16 on all 2 cores in its fastest dtype" in r.peak_flops
    assert r.peak_flops.endswith(shown)
    md = markdown.render(document.blocks(r, {}), tmp_path)
    assert f"| MFU | {r.baseline.mfu:.1%} | {r.promoted.mfu:.1%} |" in md and shown in md
    result = OptimizeResult(status=r.run_status, message=r.run_message,
                            report=ReportResult(status="ok", message="", report=r))
    text = " ".join(line.strip() for line in outcome.lines(result, 80, REPO))
    assert f"MFU {r.baseline.mfu:.1%}; promoted: " in text and f"MFU {r.promoted.mfu:.1%}" in text
    assert f"MFU of the machine's peak (220.0 GFLOP/s bf16 on all 2 cores), beside the job's own: {shown}" in text


def test_a_gpu_machine_s_peak_counts_every_gpu():
    gpus = replace(counted().hardware, gpu_name="NVIDIA H100 80GB HBM3", gpu_count=8)
    h100 = datasheet_peak(gpus.gpu_name, "bf16")
    d = replace(counted(machine_peak=h100, peak=datasheet_peak(gpus.gpu_name, "fp32")), hardware=gpus)
    r = report(promoted_run(), the_doctor=d)
    assert r.baseline.machine_mfu == pytest.approx(FLOPS / r.baseline.step_s / (8 * 989.5e12))
    assert r.machine_peak == "989,500.0 GFLOP/s × 8 devices bf16 on every GPU"


def test_doctor_keeps_the_machine_s_peak_and_reads_a_record_without_it():
    record = json.loads((DATA / "doctor.json").read_text())
    assert DoctorReport.from_dict(record).efficiency.machine_peak is None
    machine = cpu_peak(220e9, "bf16")
    again = DoctorReport.from_dict(json.loads(json.dumps(counted(machine_peak=machine).to_dict())))
    assert again.efficiency.machine_peak == machine
