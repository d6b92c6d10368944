"""The hardware fingerprint, the CPU matmul microbenchmark (really run) and the datasheet table."""

import dataclasses
import json
import time

import pytest
import torch

from infrarsi import hardware
from infrarsi.datasheet import DATASHEET, datasheet_entry, normalize_dtype
from infrarsi.hardware import fingerprint, measure_matmul_flops, peak_flops


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(hardware.CACHE_ENV, str(tmp_path / "cache"))


def test_fingerprint_describes_this_machine():
    hw = fingerprint()
    assert hw.cpu_model and hw.cpu_isa == torch.backends.cpu.get_cpu_capability()
    assert 1 <= hw.cpu_cores <= (torch.get_num_threads() + 1024)
    assert hw.ram_bytes > 2**30
    assert hw.torch_version == torch.__version__
    assert hw.gpu_count == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert hw.device == ("cuda" if hw.gpu_count else "cpu")


def test_fingerprint_id_is_stable_and_tracks_what_decides_speed():
    hw = fingerprint()
    assert hw.id == fingerprint().id and len(hw.id) == 12
    assert dataclasses.replace(hw, torch_threads=hw.torch_threads + 1).id == hw.id
    assert dataclasses.replace(hw, gpu_name="NVIDIA H100 80GB HBM3", gpu_count=8).id != hw.id
    assert dataclasses.replace(hw, torch_version="0.0").id != hw.id
    assert type(hw).from_dict(json.loads(json.dumps(hw.to_dict()))) == hw


def test_cpu_peak_is_a_real_matmul_rate():
    # An independent timing of one large product: the peak is the best rate, so it is at least
    # close to this, and no more than a plausible per-core ceiling (64 FLOP/cycle at 5 GHz).
    peak = peak_flops("cpu", "fp32", threads=1)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.mm(a, b)
        start = time.perf_counter()
        for _ in range(5):
            torch.mm(a, b)
        rate = 5 * 2 * 1024**3 / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    assert peak.method == "measured" and peak.threads == 1 and peak.dtype == "fp32"
    assert 0.5 * rate < peak.value < 64 * 5e9
    assert "measured" in peak.source


def test_cpu_peak_is_cached_by_fingerprint_dtype_and_threads():
    first = peak_flops("cpu", "bf16", threads=1)
    assert first.value > 1e6  # even a slow bf16 fallback does millions of FLOP/s
    start = time.perf_counter()
    again = peak_flops("cpu", "bfloat16", threads=1)
    assert again == first and time.perf_counter() - start < 0.1
    cached = json.loads((hardware.cache_dir() / "peak_flops.json").read_text())
    assert f"{fingerprint().id}:cpu:bf16:t1" in cached


def test_remeasuring_keeps_the_best_rate_seen():
    key = f"{fingerprint().id}:cpu:fp32:t1"
    path = hardware.cache_dir() / "peak_flops.json"
    first = peak_flops("cpu", "fp32", threads=1)

    def seed(value):
        data = json.loads(path.read_text())
        data[key]["value"] = value
        path.write_text(json.dumps(data))

    seed(1.0)  # as if measured on a machine busy with something else: the new measurement wins
    assert peak_flops("cpu", "fp32", threads=1).value == 1.0
    assert peak_flops("cpu", "fp32", threads=1, remeasure=True).value > 1e9
    seed(first.value * 100)  # a better rate seen before is kept
    assert peak_flops("cpu", "fp32", threads=1, remeasure=True).value == first.value * 100


def test_measurement_stays_within_its_budget_for_a_slow_dtype():
    start = time.perf_counter()
    assert measure_matmul_flops("cpu", "bf16", threads=1, budget_s=0.5) > 0
    assert time.perf_counter() - start < 3.0


@pytest.mark.parametrize(
    "name,entry,bf16_tflops,nvlink_gbs",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.5, 450.0),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756.5, None),
        ("NVIDIA H100 NVL", "H100 NVL", 835.5, None),
        ("NVIDIA H200", "H200 SXM", 989.5, 450.0),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM", 312.0, 300.0),
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe", 312.0, None),
        ("NVIDIA L4", "L4", 121.0, None),
        ("NVIDIA L40S", "L40S", 362.05, None),
        ("NVIDIA A10", "A10", 125.0, None),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", 165.2, None),
        ("Tesla V100-SXM2-16GB", "V100 SXM2", None, None),
    ],
)
def test_datasheet_matches_device_names_as_torch_reports_them(name, entry, bf16_tflops, nvlink_gbs):
    found = datasheet_entry(name)
    assert found is not None and found.name == entry
    assert found.tflops.get("bf16") == bf16_tflops
    assert found.nvlink_gbs == nvlink_gbs


def test_unknown_gpus_are_not_guessed():
    assert datasheet_entry("NVIDIA A10G") is None
    assert datasheet_entry("Some Future Accelerator") is None


def test_every_datasheet_entry_cites_its_source_and_orders_dtypes_sensibly():
    for entry in DATASHEET:
        assert "https://" in entry.source, entry.name
        if "bf16" in entry.tflops:
            assert entry.tflops["bf16"] >= entry.tflops["tf32"] >= entry.tflops["fp32"] * 0.99, entry.name


def test_cuda_peak_needs_a_gpu_and_dtypes_are_normalized():
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="without a visible CUDA device"):
            peak_flops("cuda", "bf16")
    assert normalize_dtype("torch.bfloat16") == "bf16" and normalize_dtype("float32") == "fp32"
    with pytest.raises(ValueError, match="unknown dtype"):
        normalize_dtype("int4")
