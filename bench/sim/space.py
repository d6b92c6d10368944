"""Constrained, conditional search spaces over ``bench.sim.model.Parallel``, as a training repo's knobs.

Each space is a workload (a model, a cluster, a global batch, the job as its owner wrote it) and
the values its launch knobs may take. The knobs carry Megatron-LM's argument names and the role
InfraRSI's catalog (``infrarsi/knobs/catalog.py``) gives those names, so the priors, the memory
pairing and the bank see them as they would in a real repo: ``micro_batch_size`` is the
micro-batch, ``recompute`` activation checkpointing, ``zero_stage`` sharding (role ``fsdp``), the
tensor, pipeline and expert parallel degrees, the virtual pipeline stages and sequence parallelism
their own roles (``tensor_parallel`` …), with the built-in priors of a parallel layout
(``infrarsi/priors/builtin.py``).

The data-parallel degree is not a knob: it is what the GPUs leave, ``gpus / (tp·pp)``, and the
accumulation is what the global batch leaves, ``B / (micro·dp)``, as in Megatron. A configuration
is valid when ``bench.sim.model.invalid`` accepts it and sequence parallelism is asked only with
tensor parallelism (it does nothing at ``tp = 1``, so the conditional dimension has one value
there); ``SimSpace`` is InfraRSI's ``SearchSpace`` restricted to those points. Out-of-memory
configurations are valid: they are the infeasible region a search must learn.

    .venv/bin/python -m bench.sim.space        # every space and stack: its size, its baseline, its optimum
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace

import numpy as np

from bench.sim.hardware import A100_80GB, H100_SXM, H200, Cluster
from bench.sim.model import Parallel, SimResult, Transformer, invalid, simulate
from bench.sim.stack import HELD_OUT, IN_SAMPLE, Stack, perturbed
from infrarsi.contract import Contract, Knob, KnobValue, LossInvariant, MemoryBudget, Scope, Workload
from infrarsi.search.space import SearchSpace
from infrarsi.trials import Candidate

TP, PP, VPP, MICRO = "tensor_model_parallel_size", "pipeline_model_parallel_size", \
    "virtual_pipeline_model_parallel_size", "micro_batch_size"
ZERO, RECOMPUTE, SP, EP = "zero_stage", "recompute", "sequence_parallel", "expert_model_parallel_size"

ROLES = {TP: "tensor_parallel", PP: "pipeline_parallel", VPP: "virtual_pipeline", MICRO: "micro_batch",
         ZERO: "fsdp", RECOMPUTE: "activation_checkpointing", SP: "sequence_parallel", EP: "expert_parallel"}
"""Each knob's role as ``infrarsi.knobs.catalog.classify`` reads its name (a test holds them to it)."""

WARMUP_STEPS, MEASURED_STEPS = 2, 5
"""Steps a trial runs: the start-up and these are its cost."""
PLANNED_STEPS = 1000
"""Steps the real job runs; start-up is amortised over them."""


@dataclass(frozen=True, slots=True)
class SimWorkload:
    """One space: the job (model, cluster, global batch, baseline split) and its knobs' domains."""

    name: str
    model: Transformer
    cluster: Cluster
    global_batch: int
    baseline: dict[str, KnobValue]
    """The job as written: every knob's default."""
    domains: dict[str, list[KnobValue]]
    model_facts: dict[str, int] = field(default_factory=dict)
    """Parameters and active parameters, as the probe reports them (the bank's workload signature)."""
    stack: Stack = IN_SAMPLE
    """Where the ground truth differs from the formulas the priors share (``bench.sim.stack``)."""

    def parallel(self, knobs: dict[str, KnobValue]) -> Parallel:
        """The split ``knobs`` describe; dp is what the GPUs leave (0 when tp·pp does not divide them)."""
        tp, pp = int(knobs[TP]), int(knobs[PP])
        gpus = self.cluster.gpus
        return Parallel(tp=tp, pp=pp, dp=gpus // (tp * pp) if gpus % (tp * pp) == 0 else 0,
                        micro_batch=int(knobs[MICRO]), global_batch=self.global_batch, vpp=int(knobs[VPP]),
                        zero=int(knobs[ZERO]), recompute=str(knobs[RECOMPUTE]),  # type: ignore[arg-type]
                        sequence_parallel=bool(knobs[SP]), ep=int(knobs.get(EP, 1)))

    def why_invalid(self, knobs: dict[str, KnobValue]) -> str:
        """Why the configuration cannot run, or "" when it can (it may still run out of memory)."""
        tp, pp, gpus = int(knobs[TP]), int(knobs[PP]), self.cluster.gpus
        if gpus % (tp * pp):
            return f"tp*pp = {tp}*{pp} does not divide the cluster's {gpus} GPUs"
        if bool(knobs[SP]) and tp == 1:
            return "sequence parallelism needs tensor parallelism (tp > 1)"
        return invalid(self.model, self.parallel(knobs), self.cluster)

    def simulate(self, knobs: dict[str, KnobValue]) -> SimResult:
        return simulate(self.model, self.parallel(knobs), self.cluster, self.stack)

    def knobs(self) -> list[Knob]:
        return [Knob(name=name, role=ROLES[name], type=_type(values), default=self.baseline[name],
                     flag=f"--{name.replace('_', '-')}", domain=list(values), tunable=True)
                for name, values in self.domains.items()]

    def contract(self) -> Contract:
        seq = self.model.seq
        return Contract(
            workload=Workload(entry="pretrain_gpt.py", command=["torchrun", "pretrain_gpt.py"], launcher="torchrun",
                              tokens_per_step=self.global_batch * seq, seq_len=seq, global_batch=self.global_batch,
                              hidden=self.model.hidden, heads=self.model.heads, layers=self.model.layers,
                              params=self.model_facts.get("params", 0),
                              attention="fused" if self.stack.flash_attention else "eager",
                              seed=1234, warmup_steps=WARMUP_STEPS, measured_steps=MEASURED_STEPS,
                              planned_steps=PLANNED_STEPS),
            loss=LossInvariant(compare_steps=5, tolerance=1e-5, numerics_tolerance=1e-4),
            memory=MemoryBudget(budget_bytes=self.cluster.gpu.hbm_bytes, device="cuda"),
            scope=Scope(editable=["pretrain_gpt.py"]),
            knobs=self.knobs(),
        )


def _type(values: list[KnobValue]) -> str:
    return "bool" if isinstance(values[0], bool) else "int" if isinstance(values[0], int) else "str"


class SimSpace(SearchSpace):
    """InfraRSI's search space restricted to a workload's valid configurations.

    The encoding, the settings and the coupled micro-batch group are the product's; only which
    candidates exist changes, so every sampler sees a constrained space through the same methods.
    """

    def __init__(self, workload: SimWorkload):
        contract = workload.contract()
        base = SearchSpace.from_contract(contract, [])
        super().__init__(knobs=contract.knobs, patches=[], patch_gates={}, global_batch=base.global_batch,
                         planned_steps=base.planned_steps, budget_bytes=base.budget_bytes, coupled=base.coupled)
        self.workload = workload
        names = [k.name for k in self.knobs]
        rows = (dict(zip(names, values, strict=True)) for values in itertools.product(*(k.domain for k in self.knobs)))
        self._valid = [Candidate(knobs=row) for row in rows if not workload.why_invalid(row)]
        self._valid_keys = {c.key() for c in self._valid}

    def is_valid(self, candidate: Candidate) -> bool:
        return not candidate.patches and candidate.key() in self._valid_keys

    def size(self) -> int:
        return len(self._valid)

    def all_candidates(self) -> list[Candidate]:
        return list(self._valid)

    def sample(self, rng: np.random.Generator, n: int) -> list[Candidate]:
        """Up to ``n`` distinct valid candidates, uniformly over the valid ones."""
        picks = rng.choice(len(self._valid), size=min(n, len(self._valid)), replace=False)
        return [self._valid[int(i)] for i in picks]

    def knob_grid(self, fixed: dict[str, KnobValue]) -> list[Candidate]:
        return [c for c in self._valid if all(c.knobs.get(k) == v for k, v in fixed.items())]


# --------------------------------------------------------------------------- the four spaces

_POW2: list[KnobValue] = [1, 2, 4, 8]
_DENSE_DOMAINS: dict[str, list[KnobValue]] = {
    TP: [1, 2, 4, 8], PP: [1, 2, 4, 8], VPP: [1, 2, 4], MICRO: [1, 2, 4, 8, 16],
    ZERO: [0, 1, 2, 3], RECOMPUTE: ["none", "selective", "full"], SP: [False, True],
}
_MEGATRON_BASELINE: dict[str, KnobValue] = {TP: 8, PP: 1, VPP: 1, MICRO: 1, ZERO: 1, RECOMPUTE: "full", SP: False}
"""The cautious split an owner writes first: the whole node tensor parallel, the smallest
micro-batch, every layer recomputed, the distributed optimizer. The 7B and 70B jobs share it, so
findings recorded against one baseline are read by the other (the bank keeps an effect only
against the same default)."""


def _facts(model: Transformer) -> dict[str, int]:
    active = model.params - (model.experts - model.top_k) * model.layers * model.expert_params
    return {"params": model.params, "active_params": active}


def _workload(name: str, model: Transformer, cluster: Cluster, global_batch: int,
              baseline: dict[str, KnobValue], domains: dict[str, list[KnobValue]]) -> SimWorkload:
    return SimWorkload(name=name, model=model, cluster=cluster, global_batch=global_batch, baseline=baseline,
                       domains=domains, model_facts=_facts(model))


LLAMA_7B = Transformer(layers=32, hidden=4096, heads=32, seq=4096, vocab=32000, ffn=11008, gated=True)
"""Llama 2 7B's shape (Touvron et al. 2023): SwiGLU MLP, multi-head attention."""
LLAMA_70B = Transformer(layers=80, hidden=8192, heads=64, seq=4096, vocab=32000, ffn=28672, kv_heads=8, gated=True)
"""Llama 2 70B's shape: grouped-query attention with 8 key/value heads."""
GPT3_175B = Transformer(layers=96, hidden=12288, heads=96)
"""GPT-3 175B (Brown et al. 2020), sequence 2048, the shape of Korthikanti et al.'s 175B row."""
MIXTRAL = Transformer(layers=32, hidden=4096, heads=32, seq=4096, vocab=32000, ffn=14336, kv_heads=8, gated=True,
                      experts=8, top_k=2)
"""Mixtral 8x7B's shape (Jiang et al. 2024): 8 experts, top-2, about 47B parameters."""

SPACES: dict[str, SimWorkload] = {
    "7b-8xh100": _workload("7b-8xh100", LLAMA_7B, Cluster(H100_SXM, 8), 256, _MEGATRON_BASELINE, _DENSE_DOMAINS),
    "70b-64xa100": _workload("70b-64xa100", LLAMA_70B, Cluster(A100_80GB, 64), 256, _MEGATRON_BASELINE,
                             {**_DENSE_DOMAINS, PP: [1, 2, 4, 8, 16], VPP: [1, 2, 5]}),
    "175b-512xa100": _workload(
        "175b-512xa100", GPT3_175B, Cluster(A100_80GB, 512), 1536,
        {**_MEGATRON_BASELINE, PP: 8},
        {**_DENSE_DOMAINS, PP: [1, 2, 4, 8, 16, 32], VPP: [1, 2, 3, 4], MICRO: [1, 2, 4, 8]}),
    "moe-8xh200": _workload(
        "moe-8xh200", MIXTRAL, Cluster(H200, 8), 256,
        {TP: 1, PP: 1, VPP: 1, MICRO: 1, ZERO: 1, RECOMPUTE: "full", SP: False, EP: 8},
        {**_DENSE_DOMAINS, EP: _POW2}),
}


@dataclass(frozen=True, slots=True)
class Optimum:
    """A space enumerated: how many points are valid, how many fit, the fastest job among them."""

    valid: int
    fits: int
    candidate: Candidate
    job_s: float
    baseline_job_s: float

    @property
    def speedup(self) -> float:
        return self.baseline_job_s / self.job_s


def job_s(result: SimResult) -> float:
    """The real job's seconds: start-up, then the planned steps (inf unless it runs)."""
    return result.startup_s + PLANNED_STEPS * result.step_s if result.ok else math.inf


def optimum(space: SimSpace) -> Optimum:
    jobs = {c.key(): job_s(space.workload.simulate(c.knobs)) for c in space.all_candidates()}
    best = min(space.all_candidates(), key=lambda c: jobs[c.key()])
    return Optimum(valid=space.size(), fits=sum(math.isfinite(j) for j in jobs.values()), candidate=best,
                   job_s=jobs[best.key()], baseline_job_s=jobs[space.baseline().key()])


def main() -> None:
    print("| space | stack | GPUs | model params | valid points | fit in memory | baseline step s | optimum | "
          "optimum step s | speedup |")
    print("|---|---|---|--:|--:|--:|--:|---|--:|--:|")
    for name, in_sample in SPACES.items():
        for stack in (IN_SAMPLE, *HELD_OUT.values(), perturbed(0), perturbed(1)):
            workload = replace(in_sample, stack=stack)
            space = SimSpace(workload)
            best = optimum(space)
            base = workload.simulate(space.baseline().knobs)
            top = workload.simulate(best.candidate.knobs)
            print(f"| {name} | {stack.name} | {workload.cluster.gpus}x {workload.cluster.gpu.name} "
                  f"| {workload.model.params / 1e9:.1f}B | {best.valid} | {best.fits} | {base.step_s:.2f} "
                  f"| {', '.join(space.settings(best.candidate))} | {top.step_s:.2f} | {best.speedup:.3f}x |")


if __name__ == "__main__":
    main()
