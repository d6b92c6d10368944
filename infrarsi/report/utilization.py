"""MFU of a measured step time, against two peaks: the job's own (doctor's, at the job's threads and
dtype; a candidate in another precision against that precision's peak, measured on a CPU and from
the datasheet on a GPU: ``matmul_precision``, ``candidate_peak``) and the
machine's (every core or GPU, in its fastest dtype: ``hardware.machine_peak``), whose gap is what
the job's settings leave unused.

FLOPs per step are doctor's (FlopCounterMode, else 6N+12LHQT from the probe's model facts) and fixed
by the contract (same model, same global batch), so MFU moves with the step time and the peak alone.
"""

from __future__ import annotations

from infrarsi.contract import Contract
from infrarsi.datasheet import datasheet_peak, matmul_dtype
from infrarsi.flops import mfu
from infrarsi.records import DoctorReport, PeakFlops
from infrarsi.trials import Candidate


def flops_per_step(contract: Contract, doctor: DoctorReport) -> float | None:
    """All ranks' FLOPs per step; a doctor.json older than the count has only FLOPs per token."""
    eff = doctor.efficiency
    if eff.flops_per_step:
        return eff.flops_per_step
    tokens = contract.workload.tokens_per_step
    return eff.flops_per_token * tokens if eff.flops_per_token and tokens else None


TF32_ON = (True, 1, "high", "medium", "tf32")
"""A TF32 setting's values that let float32 matmuls run in TF32 (``allow_tf32 = True``,
``set_float32_matmul_precision("high")``, the launcher's ``tf32_matmul``)."""


def matmul_precision(candidate: Candidate, contract: Contract, default: str, device: str) -> str:
    """fp32 | tf32 | bf16 | fp16: the precision a candidate's matmuls run in on ``device`` (cpu |
    cuda). ``default``: the job's own (doctor's peak), kept for a dtype setting doctor does not
    know. A dtype knob's value
    decides, then the autocast_bf16 patch (the forward's matmuls under bf16 autocast); float32 on a
    GPU with TF32 allowed (the tf32_matmul patch, a TF32 setting on) is tf32."""
    knob = next((k for k in contract.by_role("dtype") if k.name in candidate.knobs), None)
    dtype = matmul_dtype(str(candidate.knobs[knob.name]) if knob else None, candidate.patches, default)
    if "autocast_bf16" in candidate.patches:
        dtype = "bf16"
    tf32 = any(candidate.knobs.get(k.name, k.default) in TF32_ON for k in contract.by_role("matmul_precision"))
    if dtype == "fp32" and tf32:
        dtype = "tf32"
    if dtype == "tf32" and device != "cuda":
        dtype = "fp32"  # a CPU has no TF32: float32 matmuls stay float32
    return dtype


def candidate_peak(candidate: Candidate, contract: Contract, doctor: DoctorReport) -> PeakFlops | None:
    """What a candidate's MFU is measured against: the job's peak in the precision its matmuls run
    in (``matmul_precision``; a bf16 candidate of a float32 job against the bf16 peak, or it reads
    far above 100%): doctor's for that precision (measured on a CPU, datasheet on a GPU), else the
    GPU's datasheet entry, else doctor's own peak."""
    base = doctor.efficiency.peak
    if base is None:
        return None
    dtype = matmul_precision(candidate, contract, base.dtype, base.device)
    if dtype == base.dtype:
        return base
    known = next((p for p in doctor.efficiency.peaks if p.dtype == dtype), None)
    if known is not None:
        return known
    if base.method == "datasheet":
        return datasheet_peak(doctor.hardware.gpu_name, dtype) or base
    return base


def machine_devices(doctor: DoctorReport) -> int:
    """How many of the machine's peak devices there are: every GPU, or the one CPU."""
    peak = doctor.efficiency.machine_peak
    return max(1, doctor.hardware.gpu_count) if peak is not None and peak.device == "cuda" else 1


def step_mfu(step_s: float | None, flops: float | None, peak: PeakFlops | None, devices: int) -> float | None:
    """Achieved FLOP/s over ``devices`` × the peak, never above 1: a run that did more than a measured
    peak shows the peak was measured low (a busy machine), and the peak is at least what was done.
    None when any part is unknown."""
    if not step_s or not flops or peak is None:
        return None
    return min(1.0, mfu(1 / step_s, flops, peak.value * devices))


def _gflops(peak: PeakFlops, devices: int) -> str:
    return f"{peak.value / 1e9:,.1f} GFLOP/s{f' × {devices} devices' if devices > 1 else ''} {peak.dtype}"


def machine_words(doctor: DoctorReport) -> str:
    """The machine's peak in words (``220.5 GFLOP/s bf16 on all 2 cores``); empty when doctor measured none."""
    peak = doctor.efficiency.machine_peak
    if peak is None:
        return ""
    where = f"all {doctor.hardware.cpu_cores} cores" if peak.device == "cpu" else "every GPU"
    return f"{_gflops(peak, machine_devices(doctor))} on {where}"


def peak_words(doctor: DoctorReport, promoted_peak: PeakFlops | None,
               machine_mfus: list[tuple[str, float | None]]) -> str:
    """What MFU is measured against, for the report's caption; ``machine_mfus``: each side's MFU of
    the machine's peak by name. Empty when doctor measured no peak."""
    eff = doctor.efficiency
    if eff.peak is None:
        return ""
    words = f"{_gflops(eff.peak, eff.devices)} ({eff.peak.source})"
    if promoted_peak is not None and promoted_peak.dtype != eff.peak.dtype:
        words += f"; the promoted candidate's against {_gflops(promoted_peak, eff.devices)}"
    shown = [f"{name} {value:.1%}" for name, value in machine_mfus if value is not None]
    if eff.machine_peak is not None and shown:
        words += (f"; against the machine's peak, {machine_words(doctor)} in its fastest dtype "
                  f"({eff.machine_peak.source}): {', '.join(shown)}")
    return words
