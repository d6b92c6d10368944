"""Observes a PyTorch job through torch's global hooks and reports each step over the record channel.

Imported by this directory's ``sitecustomize`` when ``INFRARSI_RECORDS`` is set; torch's hooks are
installed the moment the job imports torch (never earlier: a helper process that does not use torch
must not pay for importing it). Standard library and torch only. What counts, exactly
(docs/launcher.md has the record format):

- A step ends when the first optimizer the job stepped steps (``register_optimizer_step_post_hook``;
  a GAN's D and G make one step per cycle of D). With no optimizer ever constructed, each
  ``backward()`` ends a step (hand-written updates). A process whose first step signal is a
  ``probe.step()`` call (a job without torch) is stepped by those calls instead.
- Its loss is the sum of the scalars ``backward()`` ran on since the previous step (unscaled when a
  ``GradScaler`` scaled them), so gradient accumulation with ``loss / accum`` keeps the batch loss.
- Tokens and samples: the first tensor argument of each grad-enabled call of the *counted* module,
  the first module called at top level (no other module's forward running) with a tensor argument
  that is data: integer tensors count as tokens (numel) and samples (leading dimension); float
  tensors that do not require grad count as samples. Calls of other modules, calls under no_grad
  (evaluation) and inputs that require grad (a generator's output fed to its critic) never count.
- FLOPs: ``FlopCounterMode`` around warm-up step 1 (step 0 when it is the only warm-up step).
- Peak device memory per step on CUDA (max allocated, reset every step); peak RSS at exit on CPU.
  With ``INFRARSI_CUDA_BUDGET_BYTES`` set, the CUDA caching allocator is held to it from the first
  top-level forward after the job initialised CUDA, so a setting that needs more fails at once with
  torch's own out-of-memory error.
- When to stop is InfraRSI's word, never known here in advance: after each step record the process
  waits for one byte on its own control FIFO (``ctl-<pid>`` beside the channel), ``c`` to go on or
  ``s`` to stop. On ``s`` (in a script that uses the probe, at its ``probe.step()`` for that step, so
  its phases arrive too) the parameters the optimizers hold are written to ``params-<pid>.pt`` beside
  the channel for InfraRSI to hash in its own process, then an exit record (peak memory) and
  ``os._exit(0)``. A job that knew how many steps it will run could spend time only in the runs
  that stop early (docs/launcher.md, "The deciding number").

What the job's code could use to reach past the hooks is kept out of reach where Python allows it
(defence in depth; the verdict never rests on it): the wrappers carry no ``__wrapped__``, and torch
holds closures, not bound methods of an object that holds the channel.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import json
import os
import select
import sys
import time
import weakref

# Types for the checker only: importing typing would cost every process of the job at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any, TypeVar

    from torch.utils.flop_counter import FlopCounterMode

    _F = TypeVar("_F", bound=Callable[..., Any])

RECORDS = "INFRARSI_RECORDS"
WARMUP = "INFRARSI_WARMUP_STEPS"
CUDA_BUDGET = "INFRARSI_CUDA_BUDGET_BYTES"
FLOP_STEP = 1
"""The warm-up step FLOPs are counted on: step 0 carries one-off work (allocation, compilation), so
it is used only when it is the one warm-up step."""

# Captured before the job's code runs: patching time.monotonic later cannot touch it.
_clock = functools.partial(time.clock_gettime, time.CLOCK_MONOTONIC)
_PIPE_BUF = getattr(select, "PIPE_BUF", 4096)


def _rank() -> int:
    return int(os.environ.get("RANK", "0") or 0)


class _Channel:
    """The FIFO to the parent; each record is one ``os.write`` below PIPE_BUF, so records of
    several processes never interleave."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def send(self, record: dict[str, Any]) -> bool:
        """Whether the record went out (one too large for an atomic write is dropped)."""
        record.setdefault("rank", _rank())
        record.setdefault("pid", os.getpid())
        record.setdefault("t", _clock())
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        if len(data) >= _PIPE_BUF and "phases" in record:
            record["phases"] = {}
            data = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        if len(data) >= _PIPE_BUF:
            return False
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY)
        os.write(self.fd, data)
        return True

    def beside(self, name: str) -> str:
        return os.path.join(os.path.dirname(self.path), f"{name}-{os.getpid()}")


class _Control:
    """This process's control FIFO: InfraRSI's answer after each step record. Made before the
    first step record goes out, so InfraRSI finds it when the record arrives."""

    def __init__(self, channel: _Channel) -> None:
        self.path = channel.beside("ctl")
        os.mkfifo(self.path, 0o600)
        self.fd: int | None = None

    def stop_here(self) -> bool:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDONLY)
        while True:
            try:
                answer = os.read(self.fd, 1)
            except InterruptedError:
                continue
            return answer != b"c"


class _Observer:
    def __init__(self, channel: _Channel) -> None:
        self.channel = channel
        warmup = int(os.environ.get(WARMUP, "0") or 0)
        # Never a measured step, and inside every run's steps (InfraRSI stops no run inside its warm-up).
        flop_step = min(FLOP_STEP, warmup - 1)
        self.flop_step = flop_step if flop_step >= 0 else None
        self.torch: Any = None  # the job's torch once it imports it: the job's version, not the checker's
        self.optimizers_made = 0
        self.first_optimizer: weakref.ref[Any] | None = None
        self.optimizers: dict[int, weakref.ref[Any]] = {}
        self.top_modules: dict[int, weakref.ref[Any]] = {}
        self.counted: weakref.ref[Any] | None = None
        self.depth = 0
        self.in_backward = 0
        self.scaled: tuple[weakref.ref[Any], Any] | None = None
        self._is_compiling: Callable[[], bool] = lambda: False
        self.cuda_budget = int(os.environ.get(CUDA_BUDGET, "0") or 0)
        self._fresh()

    def _fresh(self) -> None:
        """Per-process counters (again in a forked child, which reports as itself)."""
        self.pid = os.getpid()
        self.step = 0
        self.via: str | None = None
        self.probe_calls = 0
        self.stop_pending = False
        self.started = False
        self.stopped = False
        self.losses: list[Any] = []
        self.tokens = 0
        self.samples = 0
        self.batches = 0
        self.epoch_batches: int | None = None
        self.flop_mode: FlopCounterMode | None = None
        self.peak = 0
        self.control: _Control | None = None

    # --- events ---------------------------------------------------------------------------------

    def start(self) -> None:
        """The job's first forward or backward: the start of step 0."""
        self.started = True
        self.channel.send({"kind": "start"})
        if self.flop_step == 0 and self.torch is not None:
            self.count_flops()

    def before_forward(self, module: Any, args: tuple[Any, ...]) -> None:
        if self.compiling():
            return
        self.depth += 1
        if self.depth == 1 and self.cuda_budget:
            self.cap_cuda()
        if self.depth == 1 and not self.started:
            self.start()

    def cap_cuda(self) -> None:
        """Hold the CUDA caching allocator to the budget once the job has initialised CUDA on the
        device it chose (capping earlier would create a context on device 0 for every rank)."""
        cuda = self.torch.cuda
        if not (cuda.is_available() and cuda.is_initialized()):
            return
        device = cuda.current_device()
        total = cuda.get_device_properties(device).total_memory
        cuda.set_per_process_memory_fraction(min(1.0, self.cuda_budget / total), device)
        self.cuda_budget = 0

    def after_forward(self, module: Any, args: tuple[Any, ...], *rest: Any) -> None:
        # rest is (kwargs, output), or (output,) when torch calls the hook after an exception.
        if self.compiling():
            return
        self.depth = max(0, self.depth - 1)
        if self.depth == 0 and self.torch.is_grad_enabled():
            self.count_inputs(module, args, rest[0] if len(rest) == 2 else {})

    def count_inputs(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if id(module) not in self.top_modules:
            self.top_modules[id(module)] = weakref.ref(module)
        if self.counted is not None and self.counted() is not module:
            return
        tensor = _first_tensor((*args, *kwargs.values()), self.torch)
        if tensor is None:
            return
        leading = int(tensor.shape[0]) if tensor.dim() else 1
        if tensor.is_floating_point() or tensor.is_complex():
            if tensor.requires_grad:
                return
            self.samples += leading
        elif tensor.dtype is not self.torch.bool:
            self.tokens += tensor.numel()
            self.samples += leading
        else:
            return
        if self.counted is None:
            self.counted = weakref.ref(module)

    def before_backward(self, tensors: Any) -> None:
        if not self.started:
            self.start()
        torch = self.torch
        for tensor in (tensors,) if isinstance(tensors, torch.Tensor) else tuple(tensors):
            if isinstance(tensor, torch.Tensor) and tensor.numel() == 1:
                if self.scaled is not None and self.scaled[0]() is tensor:
                    tensor = self.scaled[1]
                self.losses.append(tensor.detach())

    def after_backward(self) -> None:
        if self.optimizers_made == 0:
            self.boundary("backward")

    def fetched(self, epoch_batches: int | None) -> None:
        """A DataLoader gave the job a batch; its loader makes ``epoch_batches`` a pass (None: no length)."""
        self.batches += 1
        self.epoch_batches = epoch_batches

    def after_optimizer_step(self, optimizer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if id(optimizer) not in self.optimizers:
            self.optimizers[id(optimizer)] = weakref.ref(optimizer)
        if self.first_optimizer is None:
            self.first_optimizer = weakref.ref(optimizer)
        if self.first_optimizer() is optimizer:
            self.boundary("optimizer")

    def probe_step(self, record: dict[str, Any]) -> None:
        """A ``probe.step()`` call: phases for the step the hooks ended, or the step boundary itself
        in a process that had no other before its first one."""
        self.channel.send(record)
        self.probe_calls += 1
        if self.via in (None, "probe"):
            self.boundary("probe", loss=record.get("loss"), tokens=record.get("tokens"))
        elif self.stop_pending:
            self.stop()

    # --- steps ----------------------------------------------------------------------------------

    def boundary(self, via: str, *, loss: float | None = None, tokens: int | None = None) -> None:
        """The end of a step, signalled ``via`` optimizer, backward or probe (the first kind seen
        in this process is the only one that counts in it)."""
        if os.getpid() != self.pid or self.stopped or self.stop_pending or self.via not in (None, via):
            return
        self.via = via
        torch = self.torch
        if via != "probe":
            # float() waits for the device: the step is over when its record is written.
            loss = sum(float(x) for x in self.losses) if self.losses else None
            tokens = self.tokens or None
        record: dict[str, Any] = {"kind": "step", "step": self.step, "via": via, "loss": loss, "tokens": tokens,
                  "samples": self.samples or None, "batches": self.batches, "epoch_batches": self.epoch_batches}
        if self.flop_mode is not None:
            self.flop_mode.__exit__(None, None, None)
            record["flops"] = int(self.flop_mode.get_total_flops())
            self.flop_mode = None
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            peak = int(torch.cuda.max_memory_allocated())
            self.peak = max(self.peak, peak)
            record["peak_bytes"] = peak
            torch.cuda.reset_peak_memory_stats()
        record["t"] = _clock()
        if self.control is None:
            self.control = _Control(self.channel)
        sent = self.channel.send(record)
        self.step += 1
        self.losses, self.tokens, self.samples, self.batches = [], 0, 0, 0
        if sent and self.control.stop_here():
            if via != "probe" and 0 < self.probe_calls == self.step - 1:
                # The script calls probe.step() after every step: wait for this one's phases.
                self.stop_pending = True
            else:
                self.stop()
        if self.step == self.flop_step and torch is not None:
            self.count_flops()

    def count_flops(self) -> None:
        """Count this step's FLOPs (the next boundary reads them)."""
        from torch.utils.flop_counter import FlopCounterMode

        self.flop_mode = FlopCounterMode(display=False)
        self.flop_mode.__enter__()

    def stop(self) -> None:
        """The contract's steps are done: final records, then out, whatever the job meant to do next."""
        self.send_exit()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(0)

    def at_exit(self) -> None:
        if self.step and os.getpid() == self.pid and not self.stopped:
            self.send_exit()

    def send_exit(self) -> None:
        self.stopped = True
        torch = self.torch
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            peak, device = max(self.peak, int(torch.cuda.max_memory_allocated())), "cuda"
        else:
            peak, device = _peak_rss(), "cpu"
        count = self.save_params()
        self.channel.send({"kind": "exit", "steps": self.step, "peak_bytes": peak, "device": device, "params": count})

    def save_params(self) -> int:
        """The parameters the optimizers hold (the top-level modules' when there is no optimizer),
        in order, to ``params-<pid>.pt`` beside the channel: InfraRSI hashes them itself, summing
        every rank's file. Rank 0 writes its whole tensors; a parameter sharded over ranks (a
        DTensor: FSDP2, tensor parallel) is written as each rank's own shard, by one rank of each
        replica group, so that every element is counted once."""
        torch = self.torch
        if torch is None:
            return 0
        params: dict[int, Any] = {}
        optimizers = [ref() for ref in self.optimizers.values()]
        for optimizer in optimizers:
            for group in getattr(optimizer, "param_groups", []) if optimizer is not None else []:
                for p in group["params"]:
                    params[id(p)] = p
        if not params:
            for ref in self.top_modules.values():
                module = ref()
                for p in module.parameters() if module is not None else ():
                    params[id(p)] = p
        owned = [t for t in (_owned_part(p, _rank()) for p in params.values()) if t is not None]
        if not owned:
            return 0
        torch.save([t.detach().cpu() for t in owned], self.channel.beside("params") + ".pt")
        return sum(t.numel() for t in owned)

    def compiling(self) -> bool:
        return self._is_compiling()

    def forked(self) -> None:
        self._fresh()


def _owned_part(param: Any, rank: int) -> Any:
    """The part of ``param`` this process counts: a DTensor's local shard where this rank is the
    first of its replicas on every mesh dimension the parameter is not sharded over; a plain
    tensor only on rank 0 (the other ranks hold replicas, as under DDP); else None."""
    placements = getattr(param, "placements", None)
    mesh = getattr(param, "device_mesh", None)
    if placements is None or mesh is None or not hasattr(param, "to_local"):
        return param if rank == 0 else None
    coordinate = mesh.get_coordinate()
    if coordinate is None:
        return None
    # No zip(strict=) (B905): the job's own Python runs this file, and before 3.10 zip takes no keywords.
    if any(c != 0 for c, placement in zip(coordinate, placements) if not placement.is_shard()):  # noqa: B905
        return None
    return param.to_local()


def _first_tensor(values: Iterable[Any], torch: Any, depth: int = 0) -> Any:
    for value in values:
        if isinstance(value, torch.Tensor):
            return value
        if depth < 2 and isinstance(value, (list, tuple)):
            found = _first_tensor(value, torch, depth + 1)
        elif depth < 2 and isinstance(value, dict):
            found = _first_tensor(tuple(value.values()), torch, depth + 1)
        else:
            continue
        if found is not None:
            return found
    return None


def _peak_rss() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


_observer: _Observer | None = None


def send(record: dict[str, Any]) -> None:
    """For ``infrarsi.probe``: a model or probe record on the same channel."""
    if _observer is None:
        return
    if record.get("kind") == "probe":
        _observer.probe_step(record)
    elif record.get("kind") == "start":
        # The probe's first call starts step 0 only in a process without torch; with torch, the
        # first forward or backward does.
        if _observer.torch is None and not _observer.started:
            _observer.start()
    else:
        _observer.channel.send(record)


SETTINGS = ("INFRARSI_NUM_THREADS", "INFRARSI_CUDNN_BENCHMARK", "INFRARSI_TF32")
"""Speed settings the runner asks for (infrarsi/launcher/settings.py), applied as torch is imported."""


def apply_settings(torch: Any) -> None:
    """Put the requested speed settings in place before the job's code goes on."""
    threads = os.environ.get("INFRARSI_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
    if os.environ.get("INFRARSI_CUDNN_BENCHMARK") == "1":
        torch.backends.cudnn.benchmark = True
    if os.environ.get("INFRARSI_TF32") == "1":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def _apply_settings_safely(torch: Any) -> None:
    try:
        apply_settings(torch)
    except Exception as err:  # a setting this torch lacks: the job runs as written, with this line
        print(f"infrarsi launcher: cannot apply settings: {type(err).__name__}: {err}", file=sys.stderr, flush=True)


def _like(wrapper: _F, wrapped: object) -> _F:
    """The wrapped function's name and docstring on ``wrapper``, and no ``__wrapped__`` leading
    back to it (``functools.wraps`` would leave one)."""
    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, name, getattr(wrapped, name))
        except (AttributeError, TypeError):
            pass
    return wrapper


def _install(torch: Any) -> None:
    """Torch is imported: apply the requested settings; hook its optimizers, modules and backward.
    Torch is handed closures, never the observer's bound methods."""
    _apply_settings_safely(torch)
    obs = _observer
    assert obs is not None  # arm() made it before watching for torch
    obs.torch = torch
    compiler = getattr(torch, "compiler", None)
    obs._is_compiling = getattr(compiler, "is_compiling", None) or (lambda: False)
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
    from torch.optim.optimizer import Optimizer, register_optimizer_step_post_hook

    def after_step(optimizer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        obs.after_optimizer_step(optimizer, args, kwargs)

    def before_forward(module: Any, args: tuple[Any, ...]) -> None:
        obs.before_forward(module, args)

    def after_forward(module: Any, args: tuple[Any, ...], *rest: Any) -> None:
        obs.after_forward(module, args, *rest)

    register_optimizer_step_post_hook(after_step)
    register_module_forward_pre_hook(before_forward)
    register_module_forward_hook(after_forward, with_kwargs=True, always_call=True)

    made: Callable[..., None] = Optimizer.__init__

    def optimizer_init(self: Any, *args: Any, **kwargs: Any) -> None:
        obs.optimizers_made += 1
        made(self, *args, **kwargs)

    Optimizer.__init__ = _like(optimizer_init, made)  # type: ignore[method-assign]  # replacing it is the hook

    # Tensor.backward calls torch.autograd.backward, so this sees both.
    backward = torch.autograd.backward

    def observed_backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if obs.in_backward or obs.compiling():
            return backward(tensors, *args, **kwargs)
        obs.before_backward(tensors)
        obs.in_backward += 1
        try:
            result = backward(tensors, *args, **kwargs)
        finally:
            obs.in_backward -= 1
        obs.after_backward()
        return result

    torch.autograd.backward = _like(observed_backward, backward)

    _count_batches(torch, obs)

    scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if scaler is not None:
        scale = scaler.scale

        def observed_scale(self: Any, outputs: Any) -> Any:
            scaled = scale(self, outputs)
            if isinstance(scaled, torch.Tensor) and isinstance(outputs, torch.Tensor):
                obs.scaled = (weakref.ref(scaled), outputs.detach())
            return scaled

        scaler.scale = _like(observed_scale, scale)

    def at_exit() -> None:
        obs.at_exit()

    def forked() -> None:
        obs.forked()

    atexit.register(at_exit)
    os.register_at_fork(after_in_child=forked)


def _count_batches(torch: Any, obs: _Observer) -> None:
    """Batches drawn from DataLoaders per step, and the length of the loader they came from: an
    epoch-counted job's length is its epochs x (loader length / batches per step)."""
    from torch.utils.data import dataloader

    fetch = dataloader._BaseDataLoaderIter.__next__

    def counted_next(self: Any) -> Any:
        batch = fetch(self)
        if not hasattr(self, "_infrarsi_len"):
            try:
                self._infrarsi_len = len(self)
            except TypeError:  # an iterable dataset has no length
                self._infrarsi_len = None
        obs.fetched(self._infrarsi_len)
        return batch

    dataloader._BaseDataLoaderIter.__next__ = _like(counted_next, fetch)  # type: ignore[method-assign]  # the hook


def _install_safely(torch: Any) -> None:
    try:
        _install(torch)
    except Exception as err:  # the job runs on; the trial fails for want of steps, with this line
        print(f"infrarsi launcher: cannot observe torch {getattr(torch, '__version__', '?')}: "
              f"{type(err).__name__}: {err}", file=sys.stderr, flush=True)


class _TorchImportWatcher:
    """A meta-path finder that runs :func:`_install` right after ``import torch`` completes.

    It stays on the meta path until torch actually executes: libraries ask
    ``importlib.util.find_spec("torch")`` to see whether torch is installed (``datasets`` does)
    without importing it, and the import that follows needs the watcher again."""

    def __init__(self, then: Callable[[ModuleType], None] | None = None) -> None:
        self.looking = False
        self.then = then or _install_safely

    def find_spec(self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
                  ) -> ModuleSpec | None:
        if name != "torch" or self.looking:
            return None
        self.looking = True  # the lookup below walks the meta path again
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.looking = False
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module
        watcher = self

        def exec_then_observe(module: ModuleType) -> None:
            if watcher in sys.meta_path:
                sys.meta_path.remove(watcher)
            exec_module(module)
            watcher.then(module)

        spec.loader.exec_module = exec_then_observe  # type: ignore[method-assign]  # the hook
        return spec


def arm_settings() -> None:
    """Only apply the speed settings (a person's run, no trial observing it)."""
    if "torch" in sys.modules:
        _apply_settings_safely(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportWatcher(_apply_settings_safely))


def arm() -> None:
    """Observe this process once it imports torch (at once if it already has)."""
    global _observer
    if _observer is not None:
        return
    _observer = _Observer(_Channel(os.environ[RECORDS]))
    if "torch" in sys.modules:
        _install_safely(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportWatcher())
