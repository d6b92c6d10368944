"""How a real stack differs from the formulas the priors share: held-out ground truth for the search.

``bench.sim.model`` prices a step and a peak with the same Table-2 activations, 18 bytes a
parameter and ring all-reduce the priors use (``infrarsi/priors``), so a search scored on it alone
is scored in-sample. A ``Stack`` changes the ground truth where real stacks differ from those
formulas, each in a way the priors do not encode (docs/sim.md, "Held-out stacks"):

- ``flash_attention``: the attention core runs as one fused kernel: no score matrix is stored or
  moved (selective recomputation then saves nothing); the job's code says so (``Workload.attention``).
- ``fragmentation``: the caching allocator's slack, a share of the activations that grows with the
  largest tensor a micro-batch allocates.
- ``comm_buffer_bytes``: NCCL's buffers, per communicator group a rank belongs to (tensor, pipeline,
  data and expert parallel).
- ``gemm_tile``: GEMM efficiency by shape: every dimension padded to the tile the kernel runs
  (wave quantisation), so odd splits run below the size rule.
- ``oom_edge``: the usable memory falls short of the datasheet by up to this share, by an amount
  that differs from configuration to configuration (allocator and NCCL internals): an OOM edge
  that is not a line in any feature.
- ``straggler_tail``: the share of steps a straggler slows, by a heavy-tailed (Pareto) factor.
- ``startup_per_node_s``: start-up grows with the nodes (image pulls, rendezvous), not only with
  the GPU count's doublings.
- ``scale``: every efficiency and overhead constant of the model multiplied (``perturbed``), within
  what published measurements allow.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field, replace

import numpy as np

SCALED = ("gemm_eff", "hbm_eff", "comm_eff", "dp_overlap", "framework_bytes", "startup_base_s")
"""The model's constants a perturbed stack scales (``bench.sim.model``: GEMM_EFF, HBM_EFF, COMM_EFF,
DP_OVERLAP, FRAMEWORK_BYTES, STARTUP_BASE_S)."""
SCALE_RANGE = {"gemm_eff": (0.75, 1.15), "hbm_eff": (0.7, 1.3), "comm_eff": (0.6, 1.3), "dp_overlap": (0.2, 1.6),
               "framework_bytes": (0.5, 2.5), "startup_base_s": (0.5, 3.0)}
"""Plausible multipliers: a large GEMM reaches 60-90% of the tensor-core peak, NCCL 40-90% of a
link, the runtime's own memory 1.5-8 GiB, a job's start-up 15 s to minutes."""
FLASH_BYTES = 4
"""Bytes per element of q, k, v and the output a fused attention kernel moves (bf16, read and write)."""
STRAGGLER_ALPHA = 1.5
"""The Pareto shape of a straggler's slowdown: a heavy tail (infinite variance)."""


@dataclass(frozen=True, slots=True)
class Stack:
    name: str = "in-sample"
    flash_attention: bool = False
    fragmentation: float = 0.0
    comm_buffer_bytes: float = 0.0
    gemm_tile: int = 0
    oom_edge: float = 0.0
    straggler_tail: float = 0.0
    startup_per_node_s: float = 0.0
    scale: dict[str, float] = field(default_factory=dict)

    def k(self, name: str) -> float:
        """The multiplier of one of the model's ``SCALED`` constants (1: as the model has it)."""
        return self.scale.get(name, 1.0)

    def padded(self, dim: float) -> float:
        """A GEMM dimension as the kernel's tiles run it."""
        return math.ceil(dim / self.gemm_tile) * self.gemm_tile if self.gemm_tile and dim > 0 else dim

    def usable_share(self, config: str) -> float:
        """The share of the datasheet's memory ``config`` may use: 1 less up to ``oom_edge``, by a
        fixed pseudo-random amount per configuration (a checksum of its description)."""
        return 1.0 - self.oom_edge * (zlib.crc32(config.encode()) % 1000) / 1000

    def straggled(self, steps: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``steps`` with ``straggler_tail`` of them slowed by 1 + a Pareto draw (at least 5%)."""
        if not self.straggler_tail:
            return steps
        hit = rng.random(steps.shape) < self.straggler_tail
        return np.where(hit, steps * (1.05 + rng.pareto(STRAGGLER_ALPHA, steps.shape) * 0.1), steps)


IN_SAMPLE = Stack()

HELD_OUT: dict[str, Stack] = {s.name: s for s in (
    Stack(name="flash attention", flash_attention=True),
    Stack(name="fragmentation", fragmentation=0.25),
    Stack(name="communication buffers", comm_buffer_bytes=1.5 * 2**30),
    Stack(name="GEMM tiles", gemm_tile=256),
    Stack(name="fuzzy OOM edge", oom_edge=0.12),
    Stack(name="stragglers", straggler_tail=0.08),
    Stack(name="start-up by nodes", startup_per_node_s=20.0),
    Stack(name="every difference", flash_attention=True, fragmentation=0.25, comm_buffer_bytes=1.5 * 2**30,
          gemm_tile=256, oom_edge=0.12, straggler_tail=0.08, startup_per_node_s=20.0),
)}
"""The held-out variants: each difference alone, then all together."""


def perturbed(seed: int, base: Stack = IN_SAMPLE) -> Stack:
    """``base`` with every ``SCALED`` constant multiplied by a draw from its ``SCALE_RANGE``
    (log-uniform), seeded: the sweep over plausible simulators."""
    rng = np.random.default_rng(seed)
    scale = {name: float(math.exp(rng.uniform(math.log(lo), math.log(hi)))) for name, (lo, hi) in SCALE_RANGE.items()}
    return replace(base, name=f"{base.name}, constants perturbed (seed {seed})", scale=scale)
