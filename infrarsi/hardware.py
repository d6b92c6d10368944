"""What machine a job runs on, and how many FLOP/s it can do at best.

The fingerprint keys everything that depends on the hardware (cached peaks, the experience bank).
The peak is the MFU denominator: on a CPU it is *measured* with a matmul microbenchmark at the
thread count the workload uses (datasheets for CPUs do not exist in a usable form, and the
achievable matmul rate depends on the ISA torch picked); on a known GPU it is the vendor's dense
datasheet number, each entry citing its source; an unknown GPU, or a dtype its datasheet does not
list, falls back to the microbenchmark. Beside the job's peak, :func:`machine_peak` is the most the
device can do whatever the job asks (every core, its fastest dtype): the report's second MFU.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psutil
import torch

from infrarsi.datasheet import datasheet_peak, normalize_dtype
from infrarsi.records.hardware import HardwareFingerprint, PeakFlops

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

CACHE_ENV = "INFRARSI_CACHE_DIR"
"""Overrides where measured peaks are cached (default ``$XDG_CACHE_HOME/infrarsi``)."""


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




# --- the peak ------------------------------------------------------------------------------------


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


def measure_matmul_flops(device: str, dtype: str, *, threads: int | None = None, budget_s: float = 1.5,
                         limit_s: float | None = None) -> float:
    """The best square-matmul rate (FLOP/s) over growing sizes, within about ``budget_s`` seconds.

    Sizes grow until one product takes a noticeable share of the budget, so a fast unit reaches
    the sizes that saturate it while a slow fallback (bf16 on a CPU without bf16 units, ~100× slower)
    still finishes in time. The best rate is kept: a peak is what the hardware *can* do.
    ``limit_s``: no larger size is started that would end past it (a busy machine slows every product).
    """
    dtype = normalize_dtype(dtype)
    max_n = 8192 if device == "cuda" else 2048
    per_size = budget_s / 5
    best = 0.0
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        with _torch_threads(threads if device == "cpu" else None), torch.no_grad():
            began = time.perf_counter()
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
                # The next size has 8x the FLOPs: its untimed and single products take 16x this one's.
                if limit_s is not None and time.perf_counter() - began + 16 * single + per_size > limit_s:
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
    data[key] = {**peak.to_dict(), "measured_at": datetime.now(UTC).isoformat(timespec="seconds")}
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
    budget_s: float = 1.5,
    limit_s: float | None = None,
) -> PeakFlops:
    """Peak FLOP/s of one ``device`` (cpu | cuda) in ``dtype`` (fp32 | tf32 | bf16 | fp16).

    CPU: measured at ``threads`` torch threads (default: all cores the process may use), cached
    under :func:`cache_dir` keyed by the fingerprint, dtype and threads. ``remeasure`` measures
    again and keeps the better of the new and the cached value: a busy machine measures low, never
    high, so the best rate seen is the closest to the peak.
    CUDA: the datasheet entry matching the device name; otherwise measured like a CPU.
    ``budget_s``, ``limit_s``: how long a measurement may take (``measure_matmul_flops``).
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
    value = measure_matmul_flops(device, dtype, threads=threads or None, budget_s=budget_s, limit_s=limit_s)
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


# --- the machine's peak --------------------------------------------------------------------------

CPU_DTYPE_UNITS = {"bf16": ("amx_bf16", "avx512_bf16"), "fp16": ("amx_fp16", "avx512_fp16")}
"""The /proc/cpuinfo flags of the units that multiply a dtype natively. Without one torch converts
to float32 and back, far slower than float32 itself: such a dtype is not measured."""
MACHINE_LIMIT_S = 0.8
"""Seconds for the machine's peak, shared by the dtypes measured: doctor stays under a second longer."""


def cpu_flags() -> set[str]:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def cpu_dtypes(flags: set[str]) -> list[str]:
    """fp32 and each dtype the CPU has units for (``CPU_DTYPE_UNITS``)."""
    return ["fp32", *(dtype for dtype, units in CPU_DTYPE_UNITS.items() if flags & set(units))]


def machine_peak(device: str, hardware: HardwareFingerprint | None = None,
                 limit_s: float = MACHINE_LIMIT_S) -> PeakFlops | None:
    """The most one ``device`` of this machine can do, whatever a job asks of it: a CPU with every
    core, in the fastest dtype it has units for (measured within ``limit_s`` in all); a GPU in the
    fastest dtype of its datasheet (measured in fp32 and bf16 when it has none). A job's own peak
    (its threads, its dtype) is :func:`peak_flops`; the gap between the two is headroom the job's
    settings leave. None: a CUDA device on a machine without one."""
    hw = hardware or fingerprint()
    if device == "cuda":
        if not hw.gpu_count:
            return None
        sheets = [p for p in (datasheet_peak(hw.gpu_name, d) for d in DTYPES) if p is not None]
        if sheets:
            return max(sheets, key=lambda p: p.value)
        dtypes = ["fp32", "bf16"] if torch.cuda.is_bf16_supported() else ["fp32"]
    else:
        dtypes = cpu_dtypes(cpu_flags())
    share = limit_s / len(dtypes)
    peaks = [peak_flops(device, dtype, threads=hw.cpu_cores, hardware=hw, remeasure=True, budget_s=share,
                        limit_s=share) for dtype in dtypes]
    return max(peaks, key=lambda p: p.value)


def precision_peaks(peak: PeakFlops, hardware: HardwareFingerprint | None = None,
                    limit_s: float = MACHINE_LIMIT_S) -> list[PeakFlops]:
    """The job's peak ``peak`` (one device, the job's threads) in every precision a candidate's
    matmuls may run in, ``peak`` first: a GPU's datasheet entries; a CPU measured at the same
    threads for each dtype it has units for (``cpu_dtypes``: a CPU without bf16 units runs bf16
    matmuls on its float32 units, so the float32 peak is theirs too), within ``limit_s`` in all."""
    hw = hardware or fingerprint()
    if peak.device == "cuda":
        others = [datasheet_peak(hw.gpu_name, d) for d in DTYPES if d != peak.dtype] if hw.gpu_count else []
        return [peak, *(p for p in others if p is not None)]
    dtypes = [d for d in cpu_dtypes(cpu_flags()) if d != peak.dtype]
    share = limit_s / max(1, len(dtypes))
    return [peak, *(peak_flops("cpu", d, threads=peak.threads or None, hardware=hw, remeasure=True, budget_s=share,
                               limit_s=share) for d in dtypes)]
