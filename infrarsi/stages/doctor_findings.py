"""What doctor states from its measurements, as sentences in the report's findings: where a
step's time goes, and how much faster a precision the machine has than the job's.
"""

from __future__ import annotations

from infrarsi.records.doctor import DoctorReport, Efficiency

# What a large share of a phase usually points at, for the summary.
_PHASE_HINTS = {
    "data": (0.10, "batches are built on the training thread; prefetching or loader workers can hide it"),
    "optimizer": (0.15, "a foreach or fused optimizer implementation usually shortens it"),
    "communication": (0.10, "gradient all-reduce is exposed; bucket sizes, overlap and no_sync under "
                            "accumulation are the levers"),
    "other": (0.10, "time outside every probe phase: logging, host-device syncs, Python between phases"),
}


def where_time_goes(report: DoctorReport) -> list[str]:
    """Where the time goes, as sentences: the split, the phases that stand out, compute efficiency."""
    out = []
    shares = report.phases.shares() if report.phases.phases else {}
    if shares:
        top = list(shares.items())[:3]
        out.append("A step is " + ", ".join(f"{name} {share:.0%}" for name, share in top)
                   + f" of {report.phases.step_s * 1000:.0f} ms.")
        compute = sum(shares.get(p, 0.0) for p in ("forward", "backward"))
        if compute:
            out.append(f"Forward and backward take {compute:.0%} of the step.")
        for name, (threshold, hint) in _PHASE_HINTS.items():
            if shares.get(name, 0.0) >= threshold:
                out.append(f"{name.capitalize()} takes {shares[name]:.0%}: {hint}.")
    eff = report.efficiency
    if eff.mfu is not None and eff.peak is not None:
        if eff.mfu >= 0.5:
            out.append(f"MFU ({eff.mfu_source} FLOPs) is {eff.mfu:.1%} of the {eff.peak.dtype} peak: the matmuls "
                       f"already run near what {eff.peak.dtype} can do here; gains must come from doing less, "
                       "overlapping more, or a faster precision.")
        else:
            out.append(f"MFU ({eff.mfu_source} FLOPs) is {eff.mfu:.1%} of the {eff.peak.dtype} peak: most of "
                       "the hardware's compute goes unused, so there is room in launch settings and kernels.")
    return out


FASTER_PRECISION = 1.5
"""How much more a second the machine's fastest precision must do than the job's for doctor to say so."""


def precision_headroom(eff: Efficiency) -> list[str]:
    """The machine's fastest precision against the job's, when it does much more a second: an fp32
    job at 50% of an H200's fp32 peak uses 3% of its bf16 tensor cores (docs/benchmarks.md)."""
    fast, own = eff.machine_peak, eff.peak
    if eff.mfu is None or fast is None or own is None or fast.dtype == own.dtype \
            or fast.value < FASTER_PRECISION * own.value:
        return []
    return [f"The job's matmuls use {eff.mfu * own.value / fast.value:.1%} of the machine's "
            f"{fast.dtype} peak ({fast.value / 1e12:.3g} TFLOP/s a device): {fast.dtype} does "
            f"{fast.value / own.value:.1f}x the {own.dtype} work a second here, the largest headroom there is."]
