"""The probe a training script calls to report to InfraRSI.

    from infrarsi import probe
    probe.model(params=n, layers=L, heads=H, head_dim=Q, seq_len=T)
    for it in range(steps):
        with probe.phase("forward"):
            ...
        probe.step(loss=loss.item(), tokens=tokens_this_step)

Each call appends one JSON line to the file named by ``INFRARSI_PROBE_FILE``. When that variable is
unset every call returns at once, so a script keeps the probe in production at no cost. Under
``torchrun`` each rank writes its own file (``<file>.rank<N>``).

Events (one JSON object per line, ``"event"`` names it):
- ``model``: the facts FLOPs are computed from (``params``, ``active_params``, ``layers``,
  ``heads``, ``head_dim``, ``seq_len``).
- ``step``: ``step`` (0-based), ``dt`` (seconds since the previous step ended, or since the first
  probe call for step 0), ``loss``, ``tokens``, ``phases`` (seconds per phase inside this step).
- ``exit``: ``peak_bytes`` and ``device`` (CUDA max allocated on a GPU, peak RSS on CPU), written
  at interpreter exit.

On a GPU the runner passes the trial's memory budget in ``INFRARSI_CUDA_BUDGET_BYTES``; from the
first probe call after the script has initialised CUDA, the process's caching allocator is held to
it, so a setting that needs more fails at once with torch's own out-of-memory error.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import resource
import sys
import time
from collections.abc import Iterator

ENV_FILE = "INFRARSI_PROBE_FILE"
ENV_CUDA_BUDGET = "INFRARSI_CUDA_BUDGET_BYTES"
PHASES = ("data", "forward", "backward", "optimizer", "communication")

_out = None
_step = 0
_last = None
_phases: dict[str, float] = {}
_capped = False


def _path() -> str | None:
    base = os.environ.get(ENV_FILE)
    if not base:
        return None
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return f"{base}.rank{os.environ.get('RANK', '0')}"
    return base


def _open():
    """Open the output on first use; None when the probe is off."""
    global _out, _last
    if _out is None:
        path = _path()
        if path is None:
            return None
        _out = open(path, "a", buffering=1)
        _last = time.perf_counter()
        atexit.register(_write_exit)
    if not _capped:
        _cap_cuda_memory()
    return _out


def budget_fraction(budget_bytes: int, total_bytes: int) -> float:
    """The share of the device a budget allows, as ``torch.cuda.set_per_process_memory_fraction`` takes it."""
    if budget_bytes <= 0 or total_bytes <= 0:
        raise ValueError(f"budget and device memory must be positive, got {budget_bytes} and {total_bytes}")
    return min(1.0, budget_bytes / total_bytes)


def _cap_cuda_memory() -> None:
    """Hold the CUDA caching allocator to the budget once the script has initialised CUDA on the
    device it chose (capping earlier would create a context on device 0 for every rank)."""
    global _capped
    budget = os.environ.get(ENV_CUDA_BUDGET)
    if not budget:
        _capped = True
        return
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return  # not yet: asked again at the next probe call
    device = torch.cuda.current_device()
    total = torch.cuda.get_device_properties(device).total_memory
    torch.cuda.set_per_process_memory_fraction(budget_fraction(int(budget), total), device)
    _capped = True


def _emit(record: dict) -> None:
    out = _open()
    if out is not None:
        out.write(json.dumps(record) + "\n")


def enabled() -> bool:
    return _path() is not None


def model(
    *,
    params: int,
    layers: int,
    heads: int,
    head_dim: int,
    seq_len: int,
    active_params: int | None = None,
) -> None:
    """Record the model facts MFU is computed from (active_params: per token, for MoE)."""
    if not enabled():
        return
    _emit(
        {
            "event": "model",
            "params": int(params),
            "active_params": int(active_params if active_params is not None else params),
            "layers": int(layers),
            "heads": int(heads),
            "head_dim": int(head_dim),
            "seq_len": int(seq_len),
        }
    )


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Time one phase of the current step; a phase entered several times accumulates."""
    if name not in PHASES:
        raise ValueError(f"unknown probe phase {name!r}; expected one of {PHASES}")
    if _open() is None:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        _phases[name] = _phases.get(name, 0.0) + time.perf_counter() - start


def step(*, loss: float, tokens: int) -> None:
    """Close one optimizer step: its loss and the tokens it consumed (all micro-batches, all ranks)."""
    global _step, _last, _phases
    if _open() is None:
        return
    now = time.perf_counter()
    _emit(
        {
            "event": "step",
            "step": _step,
            "dt": now - _last,
            "loss": float(loss),
            "tokens": int(tokens),
            "phases": _phases,
        }
    )
    _step += 1
    _phases = {}
    _last = time.perf_counter()


def peak_memory() -> tuple[int, str]:
    """Peak memory of this process so far: (bytes, device)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return int(torch.cuda.max_memory_allocated()), "cuda"
    return _peak_rss(), "cpu"


def _peak_rss() -> int:
    """This process's peak resident memory in bytes.

    VmHWM first: ru_maxrss survives exec, so a child started by a large parent (vfork shares the
    parent's memory until exec) reports the parent's peak. VmHWM belongs to the new image only.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    # Linux reports ru_maxrss in KiB.
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _write_exit() -> None:
    peak, device = peak_memory()
    _emit({"event": "exit", "peak_bytes": peak, "device": device})
    if _out is not None:
        _out.close()
