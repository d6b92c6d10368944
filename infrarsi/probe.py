"""The probe a training script calls to report to InfraRSI.

    from infrarsi import probe
    probe.model(params=n, layers=L, heads=H, head_dim=Q, seq_len=T)
    for it in range(steps):
        with probe.phase("forward"):
            ...
        probe.step(loss=loss.item(), tokens=tokens_this_step)

The probe is optional: InfraRSI measures every trial from outside the job (docs/launcher.md). In a
trial the launcher is loaded, and the probe's calls go over the launcher's channel as ``model`` and
``probe`` records: phases in the script's own words, and its loss and tokens where the launcher saw
none. The probe's own step times are never used there.

Without the launcher, each call appends one JSON line to the file named by ``INFRARSI_PROBE_FILE``
(a bare run: ``bench/launcher_overhead.py``). When neither is set every call returns at once, so a
script keeps the probe in production at no cost. Under ``torchrun`` each rank writes its own file
(``<file>.rank<N>``).

Events (one JSON object per line, ``"event"`` names it):
- ``model``: the facts FLOPs are computed from (``params``, ``active_params``, ``layers``,
  ``heads``, ``head_dim``, ``seq_len``).
- ``step``: ``step`` (0-based), ``dt`` (seconds since the previous step ended, or since the first
  probe call for step 0), ``loss``, ``tokens``, ``phases`` (seconds per phase inside this step; on
  a GPU the device's timeline between CUDA events, since a kernel runs after the call that queued
  it returns: host clocks there covered 23% of a GPT-2 step on an H200, docs/benchmarks.md).
- ``exit``: ``peak_bytes`` and ``device`` (CUDA max allocated on a GPU, peak RSS on CPU), written
  at interpreter exit.
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
from types import ModuleType
from typing import Any, TextIO

ENV_FILE = "INFRARSI_PROBE_FILE"
ENV_RECORDS = "INFRARSI_RECORDS"
"""Set by a trial: the launcher's channel (infrarsi/launcher/__init__.py holds the same name)."""
LAUNCHER_MODULE = "_infrarsi_launcher"
PHASES = ("data", "forward", "backward", "optimizer", "communication")

_out: TextIO | None = None
_step = 0
_last: float | None = None
_phases: dict[str, float] = {}
_pending: list[tuple[str, Any, Any]] = []
"""CUDA phases of the current step not yet read: (name, start event, end event), events of whatever
torch the job imported."""


def _path() -> str | None:
    base = os.environ.get(ENV_FILE)
    if not base:
        return None
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return f"{base}.rank{os.environ.get('RANK', '0')}"
    return base


def _launcher() -> ModuleType | None:
    """The launcher observing this process, when a trial loaded one."""
    if not os.environ.get(ENV_RECORDS):
        return None
    return sys.modules.get(LAUNCHER_MODULE)


def _open() -> ModuleType | TextIO | None:
    """Open the output on first use; None when the probe is off."""
    global _out, _last
    if _out is None:
        launcher = _launcher()
        if launcher is not None:
            if _last is None:
                _last = time.perf_counter()
                launcher.send({"kind": "start"})
            return launcher
        path = _path()
        if path is None:
            return None
        _out = open(path, "a", buffering=1)
        _last = time.perf_counter()
        atexit.register(_write_exit)
    return _out


def _emit(record: dict[str, Any]) -> None:
    out = _open()
    if out is None:
        return
    if isinstance(out, ModuleType):
        # The launcher's records say "kind"; its step records are its own, the probe's are "probe".
        kind = record.pop("event")
        out.send({"kind": "probe" if kind == "step" else kind, **record})
    else:
        out.write(json.dumps(record) + "\n")


def enabled() -> bool:
    return _path() is not None or _launcher() is not None


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
    cuda = _cuda()
    if cuda is not None:
        start = cuda.Event(enable_timing=True)
        start.record()
        try:
            yield
        finally:
            end = cuda.Event(enable_timing=True)
            end.record()
            _pending.append((name, start, end))
        return
    began = time.perf_counter()
    try:
        yield
    finally:
        _phases[name] = _phases.get(name, 0.0) + time.perf_counter() - began


def _cuda() -> Any:
    """``torch.cuda`` when this process already uses a GPU (the probe never initialises one)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda
    return None


def _read_pending() -> None:
    """The CUDA phases' seconds, once the device has passed their end events; the step's loss was
    usually read already, so the wait is short."""
    for name, start, end in _pending:
        try:
            end.synchronize()
            _phases[name] = _phases.get(name, 0.0) + start.elapsed_time(end) / 1000
        except RuntimeError:  # events on another device, or a context torn down: the phase goes unread
            continue
    _pending.clear()


def step(*, loss: float, tokens: int) -> None:
    """Close one optimizer step: its loss and the tokens it consumed (all micro-batches, all ranks)."""
    global _step, _last, _phases
    out = _open()
    if out is None:
        return
    _read_pending()
    record: dict[str, Any] = {"event": "step", "step": _step, "loss": float(loss), "tokens": int(tokens), "phases": _phases}
    if not isinstance(out, ModuleType):  # a bare run times itself; in a trial only InfraRSI's clock does
        assert _last is not None  # set when the file was opened
        record["dt"] = time.perf_counter() - _last
    _emit(record)
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
