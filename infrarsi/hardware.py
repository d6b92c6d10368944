"""What machine a job runs on, and how many FLOP/s it can do at best.

The fingerprint keys everything that depends on the hardware (cached peaks, the experience bank).
The peak is the MFU denominator: on a CPU it is *measured* with a matmul microbenchmark at the
thread count the workload uses (datasheets for CPUs do not exist in a usable form, and the
achievable matmul rate depends on the ISA torch picked); on a known GPU it is the vendor's dense
datasheet number, each entry citing its source; an unknown GPU, or a dtype its datasheet does not
list, falls back to the microbenchmark.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import psutil
import torch

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
_DTYPE_ALIASES = {
    "float32": "fp32", "float": "fp32", "fp32": "fp32", "32": "fp32",
    "tf32": "tf32",
    "bfloat16": "bf16", "bf16": "bf16", "bf16-mixed": "bf16",
    "float16": "fp16", "half": "fp16", "fp16": "fp16", "16": "fp16", "16-mixed": "fp16",
}

CACHE_ENV = "INFRARSI_CACHE_DIR"
"""Overrides where measured peaks are cached (default ``$XDG_CACHE_HOME/infrarsi``)."""


@dataclass(frozen=True, slots=True)
class HardwareFingerprint:
    cpu_model: str
    cpu_isa: str
    """The SIMD level torch dispatches to (AVX2, AVX512…): it decides the CPU matmul rate."""
    cpu_cores: int
    """Logical CPUs this process may run on (its affinity set)."""
    cpu_physical_cores: int
    torch_threads: int
    """torch's intra-op thread count in the measuring process (informational, not in ``id``)."""
    ram_bytes: int
    gpu_name: str
    """Empty when no CUDA device is visible."""
    gpu_count: int
    gpu_memory_bytes: int
    """Memory of device 0."""
    torch_version: str
    cuda_version: str
    """Empty for a CPU-only torch build."""
    python_version: str

    @property
    def id(self) -> str:
        """A short stable hash of what decides speed: CPU, ISA, cores, GPUs, torch and CUDA versions."""
        key = "|".join(
            str(x)
            for x in (
                self.cpu_model, self.cpu_isa, self.cpu_cores, self.gpu_name, self.gpu_count,
                self.torch_version, self.cuda_version,
            )
        )
        return hashlib.sha256(key.encode()).hexdigest()[:12]

    @property
    def device(self) -> str:
        return "cuda" if self.gpu_count else "cpu"

    def to_dict(self) -> dict:
        return {**asdict(self), "id": self.id}

    @classmethod
    def from_dict(cls, data: dict) -> HardwareFingerprint:
        return cls(**{k: v for k, v in data.items() if k != "id"})

    def describe(self) -> str:
        cpu = f"{self.cpu_model} ({self.cpu_isa}, {self.cpu_cores} cores)"
        if not self.gpu_count:
            return f"{cpu}, torch {self.torch_version}"
        gib = self.gpu_memory_bytes / 2**30
        return f"{self.gpu_count}× {self.gpu_name} ({gib:.0f} GiB), {cpu}, torch {self.torch_version} CUDA {self.cuda_version}"


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def fingerprint() -> HardwareFingerprint:
    """Describe this machine as torch sees it."""
    gpu_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    props = torch.cuda.get_device_properties(0) if gpu_count else None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return HardwareFingerprint(
        cpu_model=_cpu_model(),
        cpu_isa=torch.backends.cpu.get_cpu_capability(),
        cpu_cores=cores,
        cpu_physical_cores=psutil.cpu_count(logical=False) or cores,
        torch_threads=torch.get_num_threads(),
        ram_bytes=psutil.virtual_memory().total,
        gpu_name=props.name if props else "",
        gpu_count=gpu_count,
        gpu_memory_bytes=props.total_memory if props else 0,
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda or "",
        python_version=platform.python_version(),
    )


def normalize_dtype(name: str) -> str:
    """fp32 | tf32 | bf16 | fp16 from the spellings training scripts use."""
    key = str(name).lower().removeprefix("torch.")
    if key not in _DTYPE_ALIASES:
        raise ValueError(f"unknown dtype {name!r}; expected one of {sorted(set(_DTYPE_ALIASES))}")
    return _DTYPE_ALIASES[key]


# --- datasheet peaks -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DatasheetEntry:
    name: str
    pattern: str
    """Regex matched (case-insensitively) against ``torch.cuda.get_device_name()``."""
    tflops: dict[str, float]
    """Dense peak TFLOP/s per dtype (vendors quote 2:4 sparsity as 2× these; not used here)."""
    source: str


# Order matters: the first matching pattern wins, so variants come before the family name.
DATASHEET: tuple[DatasheetEntry, ...] = (
    DatasheetEntry(
        name="H200 NVL",
        pattern=r"H200.*NVL",
        tflops={"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0},
        source="NVIDIA H200 Tensor Core GPU datasheet, H200 NVL column, sparse values halved "
        "(https://www.nvidia.com/en-us/data-center/h200/)",
    ),
    DatasheetEntry(
        name="H200 SXM",
        pattern=r"H200",
        tflops={"bf16": 989.5, "fp16": 989.5, "tf32": 494.5, "fp32": 67.0},
        source="NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column, sparse values halved "
        "(https://www.nvidia.com/en-us/data-center/h200/)",
    ),
    DatasheetEntry(
        name="H100 NVL",
        pattern=r"H100.*NVL",
        tflops={"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0},
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column, sparse values halved "
        "(https://www.nvidia.com/en-us/data-center/h100/)",
    ),
    DatasheetEntry(
        name="H100 PCIe",
        pattern=r"H100.*PCIe",
        tflops={"bf16": 756.5, "fp16": 756.5, "tf32": 378.0, "fp32": 51.0},
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column, sparse values halved "
        "(https://www.nvidia.com/en-us/data-center/h100/)",
    ),
    DatasheetEntry(
        name="H100 SXM",
        pattern=r"H100",
        tflops={"bf16": 989.5, "fp16": 989.5, "tf32": 494.5, "fp32": 67.0},
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column, sparse values halved "
        "(https://www.nvidia.com/en-us/data-center/h100/)",
    ),
    DatasheetEntry(
        name="A100",
        pattern=r"A100",
        tflops={"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5},
        source="NVIDIA A100 Tensor Core GPU datasheet, 40GB/80GB PCIe and SXM columns (same peaks) "
        "(https://www.nvidia.com/en-us/data-center/a100/)",
    ),
    DatasheetEntry(
        name="L40S",
        pattern=r"\bL40S\b",
        tflops={"bf16": 362.05, "fp16": 362.05, "tf32": 183.0, "fp32": 91.6},
        source="NVIDIA L40S GPU datasheet, dense values (https://www.nvidia.com/en-us/data-center/l40s/)",
    ),
    DatasheetEntry(
        name="L40",
        pattern=r"\bL40\b",
        tflops={"bf16": 181.05, "fp16": 181.05, "tf32": 90.5, "fp32": 90.5},
        source="NVIDIA L40 GPU datasheet, dense values (https://www.nvidia.com/en-us/data-center/l40/)",
    ),
    DatasheetEntry(
        name="L4",
        pattern=r"\bL4\b",
        tflops={"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3},
        source="NVIDIA L4 Tensor Core GPU datasheet, sparse values halved "
        "(https://www.nvidia.com/en-us/data-center/l4/)",
    ),
    DatasheetEntry(
        name="A10",
        pattern=r"\bA10\b",
        tflops={"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2},
        source="NVIDIA A10 Tensor Core GPU datasheet, dense values "
        "(https://www.nvidia.com/en-us/data-center/products/a10-gpu/)",
    ),
    DatasheetEntry(
        name="V100S PCIe",
        pattern=r"V100S",
        tflops={"fp16": 130.0, "fp32": 16.4},
        source="NVIDIA V100 Tensor Core GPU datasheet, V100S PCIe column; Volta has no bf16 or tf32 "
        "units (https://www.nvidia.com/en-us/data-center/v100/)",
    ),
    DatasheetEntry(
        name="V100 PCIe",
        pattern=r"V100.*PCIE",
        tflops={"fp16": 112.0, "fp32": 14.0},
        source="NVIDIA V100 Tensor Core GPU datasheet, V100 PCIe column; Volta has no bf16 or tf32 "
        "units (https://www.nvidia.com/en-us/data-center/v100/)",
    ),
    DatasheetEntry(
        name="V100 SXM2",
        pattern=r"V100",
        tflops={"fp16": 125.0, "fp32": 15.7},
        source="NVIDIA V100 Tensor Core GPU datasheet, V100 SXM2 column; Volta has no bf16 or tf32 "
        "units (https://www.nvidia.com/en-us/data-center/v100/)",
    ),
    DatasheetEntry(
        name="RTX 4090",
        pattern=r"RTX 4090",
        tflops={"bf16": 165.2, "fp16": 165.2, "tf32": 82.6, "fp32": 82.6},
        source="NVIDIA Ada Lovelace GPU Architecture whitepaper, Appendix A (GeForce RTX 4090), dense "
        "tensor rates with FP32 accumulate as PyTorch uses "
        "(https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf)",
    ),
    DatasheetEntry(
        name="RTX 3090",
        pattern=r"RTX 3090",
        tflops={"bf16": 71.0, "fp16": 71.0, "tf32": 35.6, "fp32": 35.6},
        source="NVIDIA Ampere GA102 GPU Architecture whitepaper, Appendix A (GeForce RTX 3090), dense "
        "tensor rates with FP32 accumulate as PyTorch uses "
        "(https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf)",
    ),
)


def datasheet_entry(device_name: str) -> DatasheetEntry | None:
    for entry in DATASHEET:
        if re.search(entry.pattern, device_name, re.IGNORECASE):
            return entry
    return None


def datasheet_peak(device_name: str, dtype: str) -> PeakFlops | None:
    """The datasheet's dense peak of one GPU in ``dtype``; None for a GPU or dtype it does not list."""
    entry = datasheet_entry(device_name)
    dtype = normalize_dtype(dtype)
    if entry is None or dtype not in entry.tflops:
        return None
    return PeakFlops(value=entry.tflops[dtype] * 1e12, source=entry.source, device="cuda", dtype=dtype,
                     method="datasheet")


def matmul_dtype(dtype_setting: str | None, patches: Sequence[str], default: str) -> str:
    """The precision a configuration's matmuls run in: its dtype setting (``default`` when it has
    none or one doctor does not know), TF32 for float32 under the tf32_matmul patch."""
    dtype = default
    if dtype_setting is not None:
        try:
            dtype = normalize_dtype(dtype_setting)
        except ValueError:
            return default
    return "tf32" if dtype == "fp32" and "tf32_matmul" in patches else dtype


# --- the peak ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeakFlops:
    value: float
    """FLOP/s of one device (one GPU, or the CPU cores at ``threads``)."""
    source: str
    """Where the number comes from: the datasheet citation, or how it was measured."""
    device: str
    dtype: str
    method: str
    """datasheet | measured."""
    threads: int = 0
    """torch threads the CPU measurement used (0 for a GPU)."""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PeakFlops:
        return cls(**data)


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measure_matmul_flops(device: str, dtype: str, *, threads: int | None = None, budget_s: float = 1.5) -> float:
    """The best square-matmul rate (FLOP/s) over growing sizes, within about ``budget_s`` seconds.

    Sizes grow until one product takes a noticeable share of the budget, so a fast unit reaches
    the sizes that saturate it while a slow fallback (bf16 on a CPU without bf16 units, ~100× slower)
    still finishes in time. The best rate is kept: a peak is what the hardware *can* do.
    """
    dtype = normalize_dtype(dtype)
    max_n = 8192 if device == "cuda" else 2048
    per_size = budget_s / 5
    best = 0.0
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        with _torch_threads(threads if device == "cpu" else None), torch.no_grad():
            n = 128
            while n <= max_n:
                a = torch.randn(n, n, device=device).to(DTYPES[dtype])
                b = torch.randn(n, n, device=device).to(DTYPES[dtype])
                # Untimed: the first product of a size pays for library set-up (a cuBLAS handle and
                # workspace, the kernel choice), which would stop the growth at the smallest size.
                torch.mm(a, b)
                _sync(device)
                start = time.perf_counter()
                torch.mm(a, b)
                _sync(device)
                single = time.perf_counter() - start
                reps = max(1, min(1000, int(per_size / max(single, 1e-6))))
                start = time.perf_counter()
                for _ in range(reps):
                    torch.mm(a, b)
                _sync(device)
                best = max(best, 2 * n**3 * reps / (time.perf_counter() - start))
                if single > per_size / 4:
                    break
                n *= 2
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    return best


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "infrarsi"


def _cache_file() -> Path:
    return cache_dir() / "peak_flops.json"


def _read_cache() -> dict:
    try:
        return json.loads(_cache_file().read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _write_cache(key: str, peak: PeakFlops) -> None:
    data = _read_cache()
    data[key] = {**peak.to_dict(), "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    path = _cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    tmp.replace(path)


def peak_flops(
    device: str,
    dtype: str,
    *,
    threads: int | None = None,
    hardware: HardwareFingerprint | None = None,
    remeasure: bool = False,
) -> PeakFlops:
    """Peak FLOP/s of one ``device`` (cpu | cuda) in ``dtype`` (fp32 | tf32 | bf16 | fp16).

    CPU: measured at ``threads`` torch threads (default: all cores the process may use), cached
    under :func:`cache_dir` keyed by the fingerprint, dtype and threads. ``remeasure`` measures
    again and keeps the better of the new and the cached value: a busy machine measures low, never
    high, so the best rate seen is the closest to the peak.
    CUDA: the datasheet entry matching the device name; otherwise measured like a CPU.
    """
    dtype = normalize_dtype(dtype)
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be cpu or cuda, got {device!r}")
    hw = hardware or fingerprint()
    if device == "cuda":
        if not hw.gpu_count:
            raise ValueError("peak_flops('cuda', …) on a machine without a visible CUDA device")
        sheet = datasheet_peak(hw.gpu_name, dtype)
        if sheet is not None:
            return sheet
        threads = 0
        why = f"no datasheet entry for {hw.gpu_name!r} in {dtype}"
    else:
        threads = min(threads or hw.cpu_cores, hw.cpu_cores)
        why = f"{hw.cpu_model}, {hw.cpu_isa}"
    key = f"{hw.id}:{device}:{dtype}:t{threads}"
    cached = _read_cache().get(key)
    if cached:
        cached.pop("measured_at", None)
        previous = PeakFlops.from_dict(cached)
        if not remeasure:
            return previous
    value = measure_matmul_flops(device, dtype, threads=threads or None)
    if cached and previous.value >= value:
        return previous
    peak = PeakFlops(
        value=value,
        source=f"measured: best square matmul rate ({why}, {threads or 'all'} threads)",
        device=device,
        dtype=dtype,
        method="measured",
        threads=threads,
    )
    _write_cache(key, peak)
    return peak
