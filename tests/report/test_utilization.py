"""MFU in every report of a run whose FLOPs doctor counted: against the job's own peak in the
precision its matmuls run in, never above 100%, and the machine's (every core or GPU, its fastest
dtype), for the baseline and the promoted side."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from infrarsi.cli import outcome
from infrarsi.contract import Knob
from infrarsi.datasheet import datasheet_peak
from infrarsi.records import DoctorReport
from infrarsi.report import document, html, markdown
from infrarsi.report.utilization import matmul_precision
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
    assert f"| MFU | {r.baseline.mfu:.1%} of fp32 | {r.promoted.mfu:.1%} of fp32 |" in md and shown in md
    result = OptimizeResult(status=r.run_status, message=r.run_message,
                            report=ReportResult(status="ok", message="", report=r))
    text = " ".join(line.strip() for line in outcome.lines(result, 80, REPO))
    assert f"MFU {r.baseline.mfu:.1%} of the fp32 peak; promoted: " in text
    assert f"MFU {r.promoted.mfu:.1%} of the fp32 peak" in text
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


def bf16_promotion():
    """The tiny Llama of issue 52: bf16 autocast promoted at 2x the baseline's speed."""
    return run([row(0, "baseline", "ok", 150.0)],
               [verdict(candidate(patches=["autocast_bf16"]), (2.0, 1.9, 2.1), promoted=True)])


def test_a_bf16_promotion_s_mfu_is_read_against_the_bf16_peak(tmp_path):
    """Doctor measured the job's peak in fp32 and bf16 (a CPU with bf16 units, the job's threads): the
    bf16 candidate's MFU is of the bf16 peak, where against the fp32 one it read 122%; the machine's
    fastest-precision figure stays beside it."""
    d = counted(peaks=[cpu_peak(71e9), cpu_peak(300e9, "bf16")], machine_peak=cpu_peak(320e9, "bf16"))
    r = report(bf16_promotion(), the_doctor=d)
    achieved = FLOPS / r.promoted.step_s
    assert achieved / 71e9 > 1.2  # what the report printed before
    assert (r.baseline.mfu_dtype, r.promoted.mfu_dtype) == ("fp32", "bf16")
    assert r.promoted.mfu == pytest.approx(achieved / 300e9) and r.promoted.machine_mfu == pytest.approx(achieved / 320e9)
    assert r.baseline.mfu == pytest.approx(FLOPS / r.baseline.step_s / 71e9)
    assert "the promoted candidate's against 300.0 GFLOP/s bf16" in r.peak_flops
    cell = f"{r.promoted.mfu:.1%} of bf16"
    assert f"| MFU | {r.baseline.mfu:.1%} of fp32 | {cell} | – |" in markdown.render(document.blocks(r, {}), tmp_path)
    assert cell in html.render(document.blocks(r, {}), "report")
    result = OptimizeResult(status=r.run_status, message=r.run_message,
                            report=ReportResult(status="ok", message="", report=r))
    text = " ".join(line.strip() for line in outcome.lines(result, 80, REPO))
    assert f"MFU {r.promoted.mfu:.1%} of the bf16 peak" in text and f"promoted {r.promoted.machine_mfu:.1%}" in text


def test_a_gpu_s_bf16_promotion_is_read_against_its_datasheet():
    gpu = replace(counted().hardware, gpu_name="NVIDIA H100 80GB HBM3", gpu_count=1)
    d = replace(counted(peak=datasheet_peak(gpu.gpu_name, "fp32")), hardware=gpu)
    r = report(bf16_promotion(), the_doctor=d)
    assert r.promoted.mfu_dtype == "bf16"
    assert r.promoted.mfu == pytest.approx(FLOPS / r.promoted.step_s / 989.5e12)


def test_mfu_never_reads_above_100_percent():
    """A peak measured while the machine was busy is lower than what the job then did: MFU is 100%."""
    r = report(promoted_run(), the_doctor=counted(peak=cpu_peak(20e9)))
    assert FLOPS / r.baseline.step_s > 20e9
    assert r.baseline.mfu == 1.0 and r.promoted.mfu == 1.0


def _precision(*knobs: Knob):
    c = contract()
    return replace(c, knobs=[*c.knobs, *knobs])


DTYPE = Knob(name="dtype", role="dtype", type="str", default="float32", flag="--dtype",
             domain=["float32", "bfloat16", "float16"], tunable=True)
TF32 = Knob(name="tf32_matmul", role="matmul_precision", type="bool", default=False, flag="TORCH_ALLOW_TF32",
            flag_style="env", domain=[False, True], tunable=True, source="launcher")


@pytest.mark.parametrize("device, knobs, patches, precision", [
    ("cpu", {}, (), "fp32"),
    ("cpu", {"dtype": "bfloat16"}, (), "bf16"),
    ("cuda", {"dtype": "float16"}, (), "fp16"),
    ("cpu", {}, ("autocast_bf16",), "bf16"),
    ("cuda", {"tf32_matmul": True}, (), "tf32"),
    ("cuda", {}, ("tf32_matmul",), "tf32"),
    ("cuda", {"dtype": "bfloat16", "tf32_matmul": True}, (), "bf16"),  # TF32 moves float32 matmuls only
    ("cpu", {"tf32_matmul": True}, (), "fp32"),  # a CPU has no TF32
])
def test_the_precision_a_candidate_s_matmuls_run_in(device, knobs, patches, precision):
    the_contract = _precision(DTYPE, TF32)
    cand = replace(candidate(**knobs, patches=patches), knobs={**the_contract.defaults(), **knobs})
    assert matmul_precision(cand, the_contract, "fp32", device) == precision


def test_doctor_keeps_the_job_s_peak_in_each_precision():
    peaks = [cpu_peak(71e9), cpu_peak(300e9, "bf16")]
    again = DoctorReport.from_dict(json.loads(json.dumps(counted(peaks=peaks).to_dict())))
    assert again.efficiency.peaks == peaks
    assert DoctorReport.from_dict(json.loads((DATA / "doctor.json").read_text())).efficiency.peaks == []
