"""Interference: who else used the machine while a trial ran, step by step.

A step that took longer because another process took the job's cores is not evidence about the
candidate. This module measures, from InfraRSI's process while the trial runs:

- the job's process tree: CPU seconds (from the trial's cgroup, ``cpu.stat``, where it has one:
  every process the job started, seen by a walk of the tree or not; else every member's own and its
  reaped children's, ``/proc/<pid>/stat``: a short-lived child no walk of the tree saw is still the
  job's, but a member's CPU before the walk finds it counts as another process's), seconds
  runnable but waiting for a CPU (every thread, ``/proc/<pid>/task/*/schedstat``), and its threads:
  what the job got against what it could use. Waiting is what another process on the job's cores
  costs it, whatever the load;
- the cores the job may run on (``os.sched_getaffinity`` of the job): their busy and steal time
  from ``/proc/stat``. Busy time minus the tree's and minus InfraRSI's own (its record reader,
  watchdog and this sampler) is what *other* processes used there;
- on CUDA, other processes' SM use of the job's devices through NVML (``nvidia-ml-py``), when it
  is importable and a device answers.

The counters are cumulative and stamped with ``time.monotonic()``, the clock that times the
steps (docs/launcher.md), so any step's window ``[end - dt, end]`` is read by interpolating
between the samples around it: a disturbed step is told from a slow one.

What counts as disturbed is relative to what doctor measured as the machine's normal background
(:class:`Background`): a window whose other processes used more than ``Background.limit_cores``
of the job's cores (steal included), or in which the job waited for a CPU a larger share of its
runnable time than ``Background.limit_denied`` while other processes ran there (a job that only
competes with its own threads is not disturbed).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infrarsi.background import Background, Window, background

SAMPLE_S = 0.05
"""How often the counters are read: a /proc/stat line per core and one stat file per member,
well under a millisecond."""
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
DISTURBED_SHARE = 0.25
"""A trial is disturbed when at least this share of its measured steps is, or of its steps' time: a
few steps that another process slowed twentyfold (two threads on two cores, one of them taken) held
two thirds of a verification run's time in 6 of its 56 steps (docs/benchmarks.md, round five). Its start-up is recorded,
not judged: a launch's short-lived processes (the sandbox's set-up, helpers that exit before they
are seen as the job's) count as others there, enough to look disturbed on a quiet machine."""
IDLE_SAMPLE_S = 2.0


@dataclass(frozen=True, slots=True)
class Sample:
    """Cumulative counters at one instant (``at``: time.monotonic())."""

    at: float
    tree_cpu_s: float
    """CPU seconds of every member of the job's tree seen so far (a member that exited keeps its last value)."""
    tree_wait_s: float
    """Seconds the tree's threads were runnable but waiting for a CPU."""
    threads: int
    busy_s: float
    """Busy seconds summed over the job's cores, every process's (steal excluded)."""
    steal_s: float
    own_cpu_s: float
    """InfraRSI's own process's CPU seconds."""
    gpu_others: float | None = None
    """Other processes' SM utilisation (0-1, summed over the job's devices) at this instant."""


def measured_background(records: Iterable[dict[str, Any]], idle_cores: float, waited_s: float = 0.0) -> Background:
    """The normal background from an idle sample and baseline runs' interference records
    (``TrialResult.interference``: their measured steps' windows)."""
    windows, cores = [], len(job_cores())
    for record in records:
        cores = record.get("cores", cores)
        windows += [Window(**w) for w in record.get("steps", [])[record.get("measured_from", 0):] if w]
    return background(cores, idle_cores, windows, waited_s)


# --- reading the counters ------------------------------------------------------------------------


def _cpu_lines() -> dict[int, list[int]]:
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3:4].isdigit():
                name, *values = line.split()
                out[int(name[3:])] = [int(v) for v in values]
    return out


def _cores_busy_steal(cores: frozenset[int]) -> tuple[float, float]:
    """Busy and steal seconds summed over ``cores`` since boot."""
    busy = steal = 0
    for cpu, v in _cpu_lines().items():
        if cpu in cores:
            # user nice system idle iowait irq softirq steal (guest is inside user)
            busy += v[0] + v[1] + v[2] + v[5] + v[6]
            steal += v[7] if len(v) > 7 else 0
    return busy * TICK_S, steal * TICK_S


def _pid_counts(pid: int) -> tuple[float, float, int, int] | None:
    """(CPU seconds, seconds waiting for a CPU, threads, parent pid) of one process, None when it
    is gone. The CPU seconds are the process's own and those of the children it has reaped
    (``/proc/<pid>/stat``: utime, stime, cutime, cstime), so a thread that ended keeps its time and
    a short-lived child (a launcher's ``sh``, ``ldconfig``) that no walk of the tree ever saw still
    counts as the job's. The wait is summed over the live threads' ``schedstat``."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tids = os.listdir(f"/proc/{pid}/task")
    except (OSError, IndexError):
        return None
    wait = 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                wait += int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended between the listing and the read
    cpu = sum(int(v) for v in fields[11:15]) * TICK_S
    return cpu, wait / 1e9, len(tids), int(fields[1])


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def job_cores(pid: int | None = None) -> frozenset[int]:
    try:
        return frozenset(os.sched_getaffinity(pid or 0))
    except OSError:
        return frozenset(os.sched_getaffinity(0))


def idle_load(seconds: float = IDLE_SAMPLE_S, cores: frozenset[int] | None = None) -> float:
    """Cores' worth of ``cores`` other processes use, sampled over ``seconds`` while this process waits."""
    cores = cores or job_cores()
    busy0, steal0 = _cores_busy_steal(cores)
    own0, t0 = _own_cpu(), time.monotonic()
    time.sleep(seconds)
    busy1, steal1 = _cores_busy_steal(cores)
    own1, t1 = _own_cpu(), time.monotonic()
    return max(0.0, (busy1 - busy0) - (own1 - own0) + (steal1 - steal0)) / (t1 - t0)


@dataclass(kw_only=True, slots=True)
class QuietWait:
    """What waiting for a quiet machine took (``wait_for_quiet``)."""

    waited_s: float
    quiet: bool
    load_cores: float


def wait_for_quiet(limit_s: float, limit_cores: float, *, cores: frozenset[int] | None = None,
                   on_wait: Callable[[float, float], None] = lambda load, waited: None) -> QuietWait:
    """Until other processes use at most ``limit_cores`` of the job's cores, at most ``limit_s``
    seconds; ``on_wait(load, waited)`` after each busy sample, so the caller can say it waits."""
    started = time.monotonic()
    while True:
        load = idle_load(cores=cores)
        waited = time.monotonic() - started
        if load <= limit_cores:
            return QuietWait(waited_s=waited, quiet=True, load_cores=load)
        if waited >= limit_s:
            return QuietWait(waited_s=waited, quiet=False, load_cores=load)
        on_wait(load, waited)


class _Gpus:
    """Other processes' SM use of the job's devices, through NVML; absent when NVML is."""

    def __init__(self) -> None:
        import pynvml  # nvidia-ml-py: optional, only on machines with NVIDIA GPUs

        pynvml.nvmlInit()
        self._nvml = pynvml
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        count = pynvml.nvmlDeviceGetCount()
        indices = [int(i) for i in visible.split(",") if i.strip().isdigit()] if visible else range(count)
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices if i < count]
        # NVML stamps its samples in microseconds of the wall clock: only those from now on count.
        self._seen = {id(h): int(time.time() * 1e6) for h in self._handles}

    def others(self, tree: set[int]) -> float:
        """Summed SM utilisation (0-1 per device) of processes outside ``tree`` since the last call."""
        nvml, total = self._nvml, 0.0
        for handle in self._handles:
            try:
                samples = nvml.nvmlDeviceGetProcessUtilization(handle, self._seen[id(handle)])
            except nvml.NVMLError:  # no sample since the last call: no process used the device
                continue
            busiest: dict[int, int] = {}  # a process may have several samples since the last call
            for s in samples:
                self._seen[id(handle)] = max(self._seen[id(handle)], int(s.timeStamp))
                if s.pid not in tree:
                    busiest[s.pid] = max(busiest.get(s.pid, 0), int(s.smUtil))
            total += sum(busiest.values()) / 100.0
        return total

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


def _open_gpus() -> _Gpus | None:
    try:
        return _Gpus()
    except Exception:  # no nvidia-ml-py, no driver, no device: nothing to measure there
        return None


class InterferenceMonitor:
    """Samples the counters every ``sample_s`` in a thread while a trial runs.

    ``members()`` gives the job's process ids (the watchdog's walk of the tree); ``cgroup``: the
    trial's own cgroup, whose CPU count is the tree's (the walk runs every 0.2 s, and a step of a few
    milliseconds that a member not yet found spent was read as another process's); ``cuda``: also
    read NVML."""

    def __init__(self, root_pid: int, members: Callable[[], Iterable[int]], *, cgroup: Path | None = None,
                 cuda: bool = False, sample_s: float = SAMPLE_S):
        self.cores = job_cores(root_pid)
        self._members = members
        self._cgroup_cpu = cgroup / "cpu.stat" if cgroup is not None else None
        self._last_cgroup_cpu_s = 0.0
        self._sample_s = sample_s
        self._gpus = _open_gpus() if cuda else None
        self._tree: dict[int, tuple[float, float, int]] = {}
        """Per member: CPU seconds (its reaped children's included), wait seconds, parent pid."""
        self._reaped_wait = 0.0
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._sampling = threading.Lock()
        """``sample`` runs on the sampler thread and, at a stop, on the record channel's reader."""
        self._thread = threading.Thread(target=self._run, name=f"infrarsi-interference-{root_pid}", daemon=True)
        self.sample()

    def start(self) -> InterferenceMonitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sample()
        if self._gpus is not None:
            self._gpus.close()

    def _run(self) -> None:
        while not self._stop.wait(self._sample_s):
            self.sample()

    def sample(self) -> None:
        with self._sampling:
            self._sample()

    def _sample(self) -> None:
        threads = 0
        live: set[int] = set()
        with contextlib.suppress(Exception):  # a member that vanished mid-read: the next sample has it
            for pid in list(self._members()):
                seen = _pid_counts(pid)
                if seen is not None:
                    cpu, wait, count, ppid = seen
                    old = self._tree.get(pid, (0.0, 0.0, ppid))
                    self._tree[pid] = (max(old[0], cpu), max(old[1], wait), ppid)
                    threads += count
                    live.add(pid)
        # A member that is gone and whose parent is a live member was reaped by it: its CPU is in
        # the parent's now (cutime), so keeping its own would count it twice.
        # (Its wait is not in the parent's: that is kept aside.)
        for pid in [p for p, (_, _, ppid) in self._tree.items() if p not in live and ppid in live]:
            self._reaped_wait += self._tree.pop(pid)[1]
        busy, steal = _cores_busy_steal(self.cores)
        gpu = self._gpus.others(set(self._tree)) if self._gpus is not None else None
        tree_cpu = self._cgroup_cpu_s()
        self.samples.append(Sample(at=time.monotonic(),
                                   tree_cpu_s=sum(c for c, _, _ in self._tree.values()) if tree_cpu is None else tree_cpu,
                                   tree_wait_s=self._reaped_wait + sum(w for _, w, _ in self._tree.values()),
                                   threads=max(threads, 1), busy_s=busy, steal_s=steal, own_cpu_s=_own_cpu(),
                                   gpu_others=gpu))

    def _cgroup_cpu_s(self) -> float | None:
        """The cgroup's CPU seconds (``usage_usec``); its last value once the group is gone."""
        if self._cgroup_cpu is None:
            return None
        with contextlib.suppress(OSError, ValueError):
            for line in self._cgroup_cpu.read_text().splitlines():
                if line.startswith("usage_usec "):
                    self._last_cgroup_cpu_s = max(self._last_cgroup_cpu_s, int(line.split()[1]) / 1e6)
        return self._last_cgroup_cpu_s

    def covers(self, until: float) -> bool:
        """Whether a sample at or after ``until`` exists (a window ending there can be read)."""
        return bool(self.samples) and self.samples[-1].at >= until

    def window(self, start: float, end: float, *, job_ended: float | None = None) -> Window | None:
        return window(self.samples, start, end, len(self.cores), job_ended=job_ended)


def _at(samples: list[Sample], n: int, t: float, name: str) -> float:
    """A counter at time ``t``, interpolated between the first ``n`` samples around it."""
    i = bisect.bisect_left(samples, t, hi=n, key=_stamp)
    if i <= 0:
        return getattr(samples[0], name)
    if i >= n:
        return getattr(samples[n - 1], name)
    a, b = samples[i - 1], samples[i]
    w = (t - a.at) / (b.at - a.at) if b.at > a.at else 1.0
    return getattr(a, name) + w * (getattr(b, name) - getattr(a, name))


def _stamp(sample: Sample) -> float:
    return sample.at


def _mean(windows: list[Window], name: str) -> float | None:
    """``name`` averaged over ``windows``, weighted by their seconds."""
    total = sum(w.seconds for w in windows)
    return sum(getattr(w, name) * w.seconds for w in windows) / total if total else None


def window(samples: list[Sample], start: float, end: float, cores: int, *,
           job_ended: float | None = None) -> Window | None:
    """Interference over ``[start, end]`` from cumulative samples (None: no samples or no span, or
    the sample that closes it was read after ``job_ended``, when the job was stopped or exited).
    Past that moment the job's exit runs (its memory freed, its namespaces torn down by the kernel,
    all counted as other processes' CPU), and interpolating over it would spread that work over the
    steps before it: the last steps of a job whose steps are shorter than a sample (10 ms steps,
    50 ms samples) all read as disturbed. A trial samples just before each stop
    (``StepControl.before_stop``), so the steps before it keep their windows."""
    n = len(samples)  # samples are only appended: the first n stay as they are, uncopied
    if n < 2 or end <= start:
        return None
    closing = bisect.bisect_left(samples, end, hi=n, key=_stamp)
    if job_ended is not None and closing < n and samples[closing].at > job_ended:
        return None
    seconds = end - start

    def delta(name: str) -> float:
        return _at(samples, n, end, name) - _at(samples, n, start, name)

    tree, own, waited = delta("tree_cpu_s"), delta("own_cpu_s"), delta("tree_wait_s")
    first, last = bisect.bisect_left(samples, start, hi=n, key=_stamp), bisect.bisect_right(samples, end, hi=n, key=_stamp)
    inside = samples[first:last] or [samples[min(first, n - 1)]]
    threads = max(s.threads for s in inside)
    others = max(0.0, delta("busy_s") - tree - own) / seconds
    gpus = [s.gpu_others for s in inside if s.gpu_others is not None]
    return Window(seconds=seconds, others_cores=min(others, float(cores)), steal_cores=delta("steal_s") / seconds,
                  job_share=min(1.0, tree / (min(threads, cores) * seconds)),
                  denied=waited / (tree + waited) if tree + waited > 0 else 0.0,
                  gpu_others=max(gpus) if gpus else None, job_cores=tree / seconds)


@dataclass(kw_only=True, slots=True)
class TrialInterference:
    """What a trial records (``TrialResult.interference``): per step and over its start-up."""

    cores: int
    limits: Background | None
    """None: recorded only, nothing judged (doctor's own runs measure the normal)."""
    startup: Window | None = None
    steps: list[Window | None] = field(default_factory=list)
    """One per step run, warm-up included, in order (None: the window could not be read)."""
    measured_from: int = 0
    """Index of the first measured step (the warm-up steps come before it)."""

    def disturbed_steps(self) -> list[int]:
        if self.limits is None:
            return []
        return [i for i, w in enumerate(self.steps) if w is not None and w.disturbed(self.limits)]

    def disturbed(self) -> str:
        """Why the trial is not evidence about its candidate; empty when it is: ``DISTURBED_SHARE``
        of its measured steps disturbed, or of the time of every step it ran (warm-up included: a
        whole process's time is what verification measures)."""
        if self.limits is None:
            return ""
        every = self.disturbed_steps()
        measured = self.steps[self.measured_from:] or self.steps
        bad = [i for i in every if i >= self.measured_from or len(self.steps) <= self.measured_from]
        if measured and len(bad) >= max(1, DISTURBED_SHARE * len(measured)):
            return f"{len(bad)} of {len(measured)} measured steps disturbed (e.g. {self._step_why(bad[len(bad) // 2])})"
        took = sum(w.seconds for w in self.steps if w is not None)
        lost = sum(self._window(i).seconds for i in every)
        if every and lost >= DISTURBED_SHARE * took:
            longest = max(every, key=lambda i: self._window(i).seconds)
            return (f"{len(every)} of {len(self.steps)} steps disturbed, {lost:.1f} s of the steps' {took:.1f} s "
                    f"(e.g. {self._step_why(longest)})")
        return ""

    def _window(self, i: int) -> Window:
        window = self.steps[i]
        assert window is not None  # disturbed_steps lists only steps with a window
        return window

    def _step_why(self, i: int) -> str:
        assert self.limits is not None
        return f"step {i}: {self._window(i).why(self.limits)}"

    def mean_load(self) -> float | None:
        return _mean([w for w in self.steps if w is not None], "load_cores")

    def mean_job_cores(self) -> float | None:
        return _mean([w for w in self.steps[self.measured_from:] if w is not None], "job_cores")

    def to_dict(self) -> dict[str, Any]:
        return {"cores": self.cores, "limits": self.limits.to_dict() if self.limits else None,
                "measured_from": self.measured_from,
                "startup": self.startup.to_dict() if self.startup else None,
                "steps": [w.to_dict() if w else None for w in self.steps],
                "disturbed_steps": self.disturbed_steps(), "mean_load_cores": self.mean_load(),
                "mean_job_cores": self.mean_job_cores(),
                "disturbed": self.disturbed()}
