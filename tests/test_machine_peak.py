"""The machine's peak: every core of the CPU in the fastest dtype it has units for, or the fastest
dtype of a GPU's datasheet; what doctor records beside the job's own peak, in under a second."""

from __future__ import annotations

import dataclasses
import time

import pytest

from infrarsi import hardware
from infrarsi.hardware import MACHINE_LIMIT_S, cpu_dtypes, fingerprint, machine_peak, measure_matmul_flops
from infrarsi.records import PeakFlops


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(hardware.CACHE_ENV, str(tmp_path / "cache"))


def test_a_dtype_is_measured_only_where_the_cpu_has_units_for_it():
    assert cpu_dtypes(set()) == ["fp32"]
    assert cpu_dtypes({"avx2", "avx512_bf16"}) == ["fp32", "bf16"]
    assert cpu_dtypes({"amx_bf16", "amx_fp16", "amx_tile"}) == ["fp32", "bf16", "fp16"]


def test_the_cpu_s_peak_is_its_fastest_dtype_on_every_core_within_the_limit(monkeypatch):
    hw = dataclasses.replace(fingerprint(), cpu_cores=16, gpu_count=0, gpu_name="")
    rates = {"fp32": 1e12, "bf16": 4e12}
    calls = []

    def measured(device, dtype, *, threads, hardware, remeasure, budget_s, limit_s):
        calls.append((dtype, threads, remeasure, limit_s))
        return PeakFlops(value=rates[dtype], source="measured", device=device, dtype=dtype, method="measured",
                         threads=threads)

    monkeypatch.setattr(hardware, "cpu_flags", lambda: {"amx_bf16"})
    monkeypatch.setattr(hardware, "peak_flops", measured)
    peak = machine_peak("cpu", hw)
    assert (peak.dtype, peak.value, peak.threads) == ("bf16", 4e12, 16)
    assert [c[:3] for c in calls] == [("fp32", 16, True), ("bf16", 16, True)]
    assert sum(c[3] for c in calls) == pytest.approx(MACHINE_LIMIT_S) and MACHINE_LIMIT_S < 1


def test_a_gpu_s_peak_is_its_datasheet_s_fastest_dtype_without_measuring(monkeypatch):
    monkeypatch.setattr(hardware, "peak_flops", lambda *a, **kw: pytest.fail("a datasheet GPU is not measured"))
    h100 = dataclasses.replace(fingerprint(), gpu_name="NVIDIA H100 80GB HBM3", gpu_count=8)
    peak = machine_peak("cuda", h100)
    assert (peak.dtype, peak.value, peak.method) == ("bf16", 989.5e12, "datasheet")
    assert machine_peak("cuda", dataclasses.replace(h100, gpu_count=0, gpu_name="")) is None


def test_the_limit_stops_the_sizes_growing():
    start = time.perf_counter()
    assert measure_matmul_flops("cpu", "fp32", threads=1, budget_s=0.05, limit_s=0.05) > 0
    assert time.perf_counter() - start < 1.0


def test_the_job_s_peak_in_each_precision_a_candidate_may_switch_to(monkeypatch):
    """A CPU's measured at the job's threads for every dtype it has units for (the job's own peak
    first, not measured again); a GPU's from its datasheet."""
    job = PeakFlops(value=1e12, source="measured", device="cpu", dtype="fp32", method="measured", threads=4)
    calls = []

    def measured(device, dtype, *, threads, hardware, remeasure, budget_s, limit_s):
        calls.append((dtype, threads))
        return PeakFlops(value=4e12, source="measured", device=device, dtype=dtype, method="measured", threads=threads)

    monkeypatch.setattr(hardware, "cpu_flags", lambda: {"amx_bf16"})
    monkeypatch.setattr(hardware, "peak_flops", measured)
    hw = dataclasses.replace(fingerprint(), cpu_cores=16, gpu_count=0, gpu_name="")
    assert [(p.dtype, p.value) for p in hardware.precision_peaks(job, hw)] == [("fp32", 1e12), ("bf16", 4e12)]
    assert calls == [("bf16", 4)]
    gpu = dataclasses.replace(hw, gpu_count=1, gpu_name="NVIDIA H100 80GB HBM3")
    sheet = hardware.datasheet_peak(gpu.gpu_name, "fp32")
    assert {p.dtype: p.value for p in hardware.precision_peaks(sheet, gpu)}["bf16"] == 989.5e12


def test_a_cpu_without_bf16_units_keeps_the_float32_peak_alone():
    """bf16 on such a CPU runs on its float32 units: no other peak is measured (a real measurement)."""
    if cpu_dtypes(hardware.cpu_flags()) != ["fp32"]:
        pytest.skip("this CPU multiplies another dtype natively")
    job = hardware.peak_flops("cpu", "fp32", threads=1, budget_s=0.2, limit_s=0.5)
    assert hardware.precision_peaks(job) == [job]
