"""Known response surfaces: the yardstick for the search's tests and its overhead benchmark.

A ``Surface`` answers a candidate with a ``TrialResult`` as a real trial would (OOM above the
budget, log-normal noise on step time and peak), from effects the caller chose, so a test can
check that the models recover them and that a sampler finds the known optimum.
"""

from __future__ import annotations

import math

import numpy as np

from infrarsi.byte_units import GIB
from infrarsi.contract import Contract, Knob, LossInvariant, MemoryBudget, Scope, Workload
from infrarsi.search.space import SearchSpace
from infrarsi.trials import Candidate, TrialResult, TrialStatus


def contract_with(knobs: list[Knob], *, global_batch: int = 16, budget_bytes: int = GIB,
                  planned_steps: int = 1000) -> Contract:
    return Contract(
        workload=Workload(
            entry="train.py",
            command=["python", "train.py"],
            tokens_per_step=global_batch * 256,
            seq_len=256,
            global_batch=global_batch,
            seed=1337,
            warmup_steps=2,
            measured_steps=8,
            planned_steps=planned_steps,
        ),
        loss=LossInvariant(compare_steps=5, tolerance=1e-5, numerics_tolerance=1e-4),
        memory=MemoryBudget(budget_bytes=budget_bytes),
        scope=Scope(editable=["model.py"]),
        knobs=knobs,
    )


def dense_knobs() -> list[Knob]:
    """The tunable knobs of fixtures/dense_gpt (the script derives accumulation from the batch)."""
    return [
        Knob(name="micro_batch_size", role="micro_batch", type="int", default=4, flag="--micro_batch_size",
             domain=[1, 2, 4, 8, 16], tunable=True),
        Knob(name="threads", role="threads", type="int", default=2, flag="--threads", domain=[1, 2], tunable=True),
        Knob(name="activation_checkpointing", role="activation_checkpointing", type="bool", default=False,
             flag="--activation_checkpointing", flag_style="store_true", domain=[False, True], tunable=True),
        Knob(name="compile", role="compile", type="bool", default=False, flag="--compile",
             flag_style="store_true", domain=[False, True], tunable=True),
        Knob(name="dtype", role="dtype", type="str", default="float32", flag="--dtype",
             domain=["float32", "bfloat16"], tunable=True),
        Knob(name="optimizer_impl", role="optimizer_impl", type="str", default="for-loop", flag="--optimizer_impl",
             domain=["for-loop", "foreach", "fused"], tunable=True),
        Knob(name="batch_size", role="workload", type="int", default=16, flag="--batch_size"),
    ]


DENSE_PATCHES = ["fused_qkv", "sdpa_attention", "no_grad_eval", "set_to_none", "flash_mlp"]

# Ground truth shaped like docs/measured.md's small GPT on a 2-core CPU (log multipliers against the
# baseline); the patch effects are invented. Used as the known answer, never as a prior.
DENSE_TIME = {
    "micro_batch_size=1": 0.31, "micro_batch_size=2": 0.12, "micro_batch_size=8": -0.06,
    "micro_batch_size=16": -0.10, "threads=1": 0.57, "activation_checkpointing=True": 0.17,
    "dtype=bfloat16": 3.0, "optimizer_impl=fused": -0.08, "compile=True": -0.05,
    "patch:fused_qkv": -0.12, "patch:flash_mlp": -0.20, "patch:set_to_none": -0.03,
}
DENSE_MEM = {
    "micro_batch_size=1": -0.45, "micro_batch_size=2": -0.30, "micro_batch_size=8": 0.35,
    "micro_batch_size=16": 0.75, "activation_checkpointing=True": -0.30, "patch:flash_mlp": 0.10,
    "compile=True": 0.05,
}
DENSE_STARTUP = {"compile=True": 35.0}
"""Seconds added to start-up: a cold torch.compile."""


def result(cand: Candidate, status: TrialStatus = TrialStatus.OK, *, step: float | None = None,
           peak: float | None = None, startup: float | None = 3.0) -> TrialResult:
    """A trial result with a constant step time (5 measured steps)."""
    steps = [step] * 5 if step is not None else []
    return TrialResult(status, cand, step_times=steps, peak_bytes=int(peak) if peak is not None else None,
                       startup_s=startup, wall_s=(startup or 0.0) + sum(steps))


class Surface:
    """Log step time, log peak and start-up additive in the candidate's settings, plus noise;
    ``pair_effects`` adds a log step time to each candidate holding both settings of a pair."""

    def __init__(self, space: SearchSpace, time_effects: dict[str, float], mem_effects: dict[str, float],
                 *, base_step: float = 1.0, base_peak: float = 0.6 * GIB, noise: float = 0.02,
                 base_startup: float = 3.0, startup_effects: dict[str, float] | None = None, seed: int = 0,
                 pair_effects: dict[tuple[str, str], float] | None = None):
        self.space = space
        self.time = time_effects
        self.pairs = pair_effects or {}
        self.mem = mem_effects
        self.base_step = base_step
        self.base_peak = base_peak
        self.noise = noise
        self.base_startup = base_startup
        self.startup = startup_effects or {}
        self.rng = np.random.default_rng(seed)

    def log_step(self, cand: Candidate) -> float:
        held = set(self.space.settings(cand))
        return (math.log(self.base_step) + sum(self.time.get(k, 0.0) for k in held)
                + sum(v for (a, b), v in self.pairs.items() if a in held and b in held))

    def log_peak(self, cand: Candidate) -> float:
        return math.log(self.base_peak) + sum(self.mem.get(k, 0.0) for k in self.space.settings(cand))

    def startup_s(self, cand: Candidate) -> float:
        """Seconds: start-up costs add (compilation is tens of seconds on top of the imports)."""
        return self.base_startup + sum(self.startup.get(k, 0.0) for k in self.space.settings(cand))

    def job_s(self, cand: Candidate) -> float:
        return self.startup_s(cand) + self.space.planned_steps * math.exp(self.log_step(cand))

    def fits(self, cand: Candidate) -> bool:
        return self.log_peak(cand) <= math.log(self.space.budget_bytes)

    def run(self, cand: Candidate) -> TrialResult:
        peak = math.exp(self.log_peak(cand) + self.rng.normal(0, self.noise / 2))
        startup = self.startup_s(cand)
        if peak > self.space.budget_bytes:
            return TrialResult(TrialStatus.OOM, cand, peak_bytes=int(peak), startup_s=startup, wall_s=startup)
        steps = np.exp(self.log_step(cand) + self.rng.normal(0, self.noise, 5)).tolist()
        return TrialResult(TrialStatus.OK, cand, step_times=steps, peak_bytes=int(peak), startup_s=startup,
                           wall_s=startup + sum(steps))

    def optimum(self) -> Candidate:
        fitting = [c for c in self.space.all_candidates() if self.fits(c)]
        return min(fitting, key=self.job_s)
