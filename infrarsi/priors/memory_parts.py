"""Which part of the peak each role's memory scales, and by how much: the structure of a peak.

A training job's peak is a sum of parts that scale with different knobs: the state (weights,
gradients, optimizer state, and on a CPU the runtime) divided by the pipeline stages and by
sharding, and the activations, linear in the micro-batch and cut by recomputation and sequence
parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", Table 2; Rajbhandari et al. 2020, "ZeRO"; docs/sim.md, "Memory"). A whole-peak effect
(``Prior.mem_log_mean``) is right only at the baseline's mix of the two: micro-batch 8 costs little
under full recomputation and a lot without it. So a role below gives its effect on its own part,
and the search's memory model (``infrarsi.search.memory_model``) adds the parts, fitting their mix
from the trials. Roles not here (tensor parallelism, which divides both, dtype, compile) scale the
whole peak.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infrarsi.contract import Contract, Knob, KnobValue

if TYPE_CHECKING:  # importing it imports torch; the rules read the device and the GPU count
    from infrarsi.records.hardware import HardwareFingerprint as Hardware

STATE, ACTIVATIONS = "state", "activations"
Rule = Callable[[Knob, KnobValue, "Hardware", Contract], "PartEffect | None"]


@dataclass(frozen=True, slots=True)
class PartEffect:
    """Log effect of a setting on one part of the peak, against the baseline's value."""

    part: str
    log_mean: float
    log_sd: float


def value_ratio(knob: Knob, value: KnobValue) -> float | None:
    """``value`` over the knob's default, where both are positive numbers (not booleans)."""
    if isinstance(value, bool) or isinstance(knob.default, bool):
        return None
    try:
        v, d = float(value), float(knob.default)
    except (TypeError, ValueError):
        return None
    return v / d if v > 0 and d > 0 else None


def _text(value: KnobValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip().lower().replace("-", "_").replace(" ", "_")


def _micro_batch(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
    r = value_ratio(knob, value)
    # Every activation is per sample: exactly linear in the micro-batch.
    return None if r is None else PartEffect(ACTIVATIONS, math.log(r), 0.05)


def _grad_accum(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
    r = value_ratio(knob, value)
    if r is None or contract.by_role("micro_batch"):
        return None  # with a micro-batch knob, accumulation follows it and has no effect of its own
    return PartEffect(ACTIVATIONS, -math.log(r), 0.05)


_RECOMPUTE = {
    # Selective drops the attention scores (5as/h of 34 + 5as/h bytes per token and hidden unit);
    # full keeps each layer's input, 2 of them, plus one layer's while it runs.
    "cuda": {"off": (0.0, 0.0), "selective": (-1.0, 0.6), "on": (-3.0, 0.8)},
    # On a CPU, small models at short sequences: this project measured -11% peak RSS with
    # checkpointing at ~30% activations (docs/measured.md), about -0.5 on the activations.
    "cpu": {"off": (0.0, 0.0), "selective": (-0.2, 0.3), "on": (-0.5, 0.4)},
}


def _recompute_level(value: KnobValue) -> str:
    text = _text(value)
    if text in ("", "0", "false", "off", "no", "none", "disable", "disabled"):
        return "off"
    return "selective" if "selective" in text else "on"


def _levels(table: dict[str, dict[str, tuple[float, float]]], canon: Callable[[KnobValue], str | None],
            part: str) -> Rule:
    def rule(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
        levels = table["cuda" if hw.device == "cuda" else "cpu"]
        a, b = canon(value), canon(knob.default)
        if a is None or b is None:
            return None
        (mean, sd), (ref, ref_sd) = levels[a], levels[b]
        return PartEffect(part, mean - ref, max(math.hypot(sd, ref_sd), 0.02))

    return rule


_SHARDING_CPU = {"0": (0.0, 0.0), "1": (-0.15, 0.3), "2": (-0.3, 0.3), "3": (-0.5, 0.4)}
"""On a CPU the runtime is part of the state and is not sharded."""
REPLICATED = {"0": 18.0, "1": 6.0, "2": 2.0, "3": 0.0}
"""Bytes per parameter each data-parallel rank keeps whole at each ZeRO stage, of Megatron's 18
(bf16 weight 2, fp32 gradient 4, fp32 master weight and Adam's moments 12); the rest is divided
over the d ranks (Rajbhandari et al. 2020; docs/sim.md, "Memory")."""
WORKING_WEIGHTS = 0.05
"""ZeRO 3's gathered layers and prefetch buffers, as a share of the unsharded state."""


def _data_parallel(hw: Hardware, contract: Contract) -> float:
    """The baseline's data-parallel degree: the GPUs its model-parallel degrees leave."""
    degrees = [k.default for role in ("tensor_parallel", "pipeline_parallel") for k in contract.by_role(role)]
    split = math.prod(float(v) for v in degrees if isinstance(v, int) and not isinstance(v, bool) and v > 0)
    return max(hw.gpu_count / split, 1.0)


def _state_kept(stage: str, d: float) -> float:
    replicated = REPLICATED[stage]
    return (replicated + (18 - replicated) / d) / 18 + (WORKING_WEIGHTS if stage == "3" and d > 1 else 0.0)


def _sharding(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
    a, b = sharding_stage(value), sharding_stage(knob.default)
    if a is None or b is None:
        return None
    if hw.device != "cuda" or not hw.gpu_count:
        (mean, sd), (ref, ref_sd) = _SHARDING_CPU[a], _SHARDING_CPU[b]
        return PartEffect(STATE, mean - ref, max(math.hypot(sd, ref_sd), 0.02))
    # Exact at the baseline's layout; a layout with more data-parallel ranks shards further.
    d = _data_parallel(hw, contract)
    return PartEffect(STATE, math.log(_state_kept(a, d) / _state_kept(b, d)), 0.3 if a != b else 0.02)


def sharding_stage(value: KnobValue) -> str | None:
    """ZeRO's stage of a sharding setting: DeepSpeed's numbers, FSDP's strategies."""
    text = _text(value)
    if text in ("0", "1", "2", "3"):
        return text
    for stage, names in (("0", ("off", "false", "no_shard", "none", "no")),
                         ("1", ("zero1", "optimizer", "os")),
                         ("2", ("shard_grad_op", "hybrid_shard", "zero2", "grad_op")),
                         ("3", ("full_shard", "full", "true", "on", "zero3", "fsdp"))):
        if text in names:
            return stage
    return None


def _sequence_parallel(value: KnobValue) -> str | None:
    text = _text(value)
    return "off" if text in ("false", "0", "off", "no", "none", "") else "on"


_SEQUENCE_PARALLEL = {
    # The layer norms' and dropouts' 10 of 34 bytes, split over the tensor-parallel ranks.
    "cuda": {"off": (0.0, 0.0), "on": (-0.25, 0.2)},
    "cpu": {"off": (0.0, 0.0), "on": (-0.05, 0.1)},
}


def _split(share: float, sd: float) -> Rule:
    """A degree dividing ``share`` of the state (on a GPU; half as much on a CPU, whose runtime it
    does not divide)."""
    def rule(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
        r = value_ratio(knob, value)
        if r is None:
            return None
        s = share if hw.device == "cuda" else share / 2
        return PartEffect(STATE, math.log1p(s * (1 / r - 1)), sd)

    return rule


def in_flight(stages: float) -> float:
    """The first stage keeps 1 + (p-1)/(p·v) times the activations in flight, about 1 + 1/v."""
    return 1.0 if stages <= 1 else 1.0 + 1.0 / stages


def _virtual_pipeline(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
    r = value_ratio(knob, value)
    if r is None:
        return None
    return PartEffect(ACTIVATIONS, math.log(in_flight(float(value)) / in_flight(float(knob.default))), 0.1)


PART_RULES: dict[str, Rule] = {
    "micro_batch": _micro_batch,
    "grad_accum": _grad_accum,
    "activation_checkpointing": _levels(_RECOMPUTE, _recompute_level, ACTIVATIONS),
    "fsdp": _sharding,
    # Each stage holds 1/p of the layers, while under 1F1B the first keeps p micro-batches of its
    # l/p layers in flight: the activations stay (Narayanan et al. 2021, Section 2.2).
    "pipeline_parallel": _split(1.0, 0.1),
    # The experts are most of a MoE's parameters (Mixtral: 45 of 47 B).
    "expert_parallel": _split(0.9, 0.2),
    "virtual_pipeline": _virtual_pipeline,
    "sequence_parallel": _levels(_SEQUENCE_PARALLEL, _sequence_parallel, ACTIVATIONS),
}


def part_effect(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
    """The effect of ``knob`` at ``value`` on its part of the peak, or None where it scales the whole."""
    rule = PART_RULES.get(knob.role)
    return None if rule is None else rule(knob, value, hw, contract)
