"""The simulated cluster as a trial backend: a runner with the measured table's interface.

``bench.tuners.replay`` drives the run stage's loop (``TrialStore``, the ``Strategy``, the abort
bound, the re-verified pick) against a runner; ``SimTable`` is one, so InfraRSI's sampler, time,
memory and crash models, seeding, priors, bank and verification ranking run unchanged on a space
of thousands of configurations. A trial of a configuration is its simulated job:

- ``ok``: the start-up, then ``WARMUP_STEPS + MEASURED_STEPS`` step times drawn with
  ``bench.sim.model.Noise`` around the model's step, and a peak drawn the same way with a smaller
  CV; the runner's abort rules (``bench.tuners.table.aborted``) may stop it early.
- ``oom``: the start-up and one step, the one that runs out of memory; no peak is reported (the
  memory model reads it as censored at the budget).
- ``crash``: a configuration the job refuses (``SimWorkload.why_invalid``), after the processes
  started (``STARTUP_BASE_S``). Only an Optuna sampler asked over the flat product proposes one,
  and replay gives those back before they run (``replay.MAX_REJECTED``).
- ``timeout``: a run longer than the run stage's bound, ``max(180 s, 6 x the baseline trial)``.

The cost of a trial is its ``wall_s``. The verified speedup of a pick is the noise-free one:
re-verification is taken to measure the true job time.
"""

from __future__ import annotations

import math

import numpy as np

from bench.sim.hardware import Cluster
from bench.sim.model import STARTUP_BASE_S, Noise, SimResult
from bench.sim.space import MEASURED_STEPS, WARMUP_STEPS, SimSpace, SimWorkload, job_s, optimum
from bench.tuners.table import aborted
from infrarsi.noise import min_trustworthy_speedup
from infrarsi.records import HardwareFingerprint
from infrarsi.trials import Candidate, TrialResult, TrialStatus

NOISE_CV = 0.02
"""Run-to-run CV of a step: a quiet dedicated cluster (doctor's 1% floor to a few percent)."""
PEAK_CV = 0.01
"""A peak (the allocator's maximum) repeats more closely than a step time."""


def sim_hardware(cluster: Cluster) -> HardwareFingerprint:
    """The fingerprint a run on ``cluster`` records: its GPUs decide speed; the host is nominal."""
    return HardwareFingerprint(cpu_model="simulated host", cpu_isa="AVX512", cpu_cores=64, cpu_physical_cores=32,
                               torch_threads=32, ram_bytes=2 * 1024**4, gpu_name=cluster.gpu.name,
                               gpu_count=cluster.gpus, gpu_memory_bytes=cluster.gpu.hbm_bytes,
                               torch_version="2.13.0", cuda_version="12.8", python_version="3.11")


class SimTable:
    """A ``SimWorkload`` behind the interface ``bench.tuners.replay`` runs a method against."""

    def __init__(self, workload: SimWorkload, noise_cv: float = NOISE_CV, peak_cv: float = PEAK_CV):
        self.workload = workload
        self.contract = workload.contract()
        self.patches: list[str] = []
        self.space = SimSpace(workload)
        self.hardware = sim_hardware(workload.cluster)
        self.planned = self.contract.workload.planned_steps
        self.noise, self.peak_noise = Noise(noise_cv), Noise(peak_cv)
        self.data = {"fixture": workload.name, "noise_cv": noise_cv, "model_facts": workload.model_facts,
                     "doctor": {"noise": {"min_speedup": min_trustworthy_speedup(noise_cv)}}}
        self._results: dict[str, SimResult] = {}
        self._candidates = {c.key(): c for c in self.space.all_candidates()}
        self.best = optimum(self.space)
        base = self.result(self.space.baseline())
        self.baseline_job_s = job_s(base)
        self.timeout_s = max(180.0, 6 * (base.startup_s + (WARMUP_STEPS + MEASURED_STEPS) * base.step_s))

    def result(self, candidate: Candidate) -> SimResult:
        key = candidate.key()
        if key not in self._results:
            self._results[key] = self.workload.simulate(candidate.knobs)
        return self._results[key]

    def search_space(self, patches: list[str]) -> SimSpace:
        return self.space

    def candidate(self, key: str) -> Candidate:
        return self._candidates[key]

    def job_s(self, key: str) -> float:
        return job_s(self.result(self._candidates[key])) if key in self._candidates else math.inf

    def speedup(self, key: str | None) -> float:
        """Job-time speedup over the baseline; 1.0 when nothing deployable is picked."""
        if key is None or not math.isfinite(self.job_s(key)):
            return 1.0
        return max(1.0, self.baseline_job_s / self.job_s(key))

    def oracle(self) -> tuple[str, float]:
        return self.best.candidate.key(), self.best.speedup

    def trial(self, candidate: Candidate, rng: np.random.Generator, abort_step_time: float | None) -> TrialResult:
        if not self.space.is_valid(candidate):
            return TrialResult(TrialStatus.CRASH, candidate, wall_s=STARTUP_BASE_S,
                               detail=self.workload.why_invalid(candidate.knobs) or "not a configuration of the space")
        r = self.result(candidate)
        if r.oom:
            step = float(self.noise.draw(r.step_s, rng))
            return TrialResult(TrialStatus.OOM, candidate, startup_s=r.startup_s, wall_s=r.startup_s + step,
                               detail=r.reason)
        drawn = np.atleast_1d(self.noise.draw(r.step_s, rng, WARMUP_STEPS + MEASURED_STEPS))
        steps = [float(s) for s in self.workload.stack.straggled(drawn, rng)]
        out = TrialResult(TrialStatus.OK, candidate, warmup_times=steps[:WARMUP_STEPS],
                          step_times=steps[WARMUP_STEPS:], startup_s=r.startup_s, wall_s=r.startup_s + sum(steps),
                          peak_bytes=int(self.peak_noise.draw(r.peak_bytes, rng)),
                          steps_run=WARMUP_STEPS + MEASURED_STEPS)
        if aborted(out, abort_step_time):
            return out
        if out.wall_s > self.timeout_s:
            out.status, out.wall_s, out.step_times = TrialStatus.TIMEOUT, self.timeout_s, []
        return out
