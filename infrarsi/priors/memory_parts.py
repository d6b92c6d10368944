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

from infrarsi.contract import Contract, Knob, KnobValue

STATE, ACTIVATIONS = "state", "activations"


@dataclass(frozen=True, slots=True)
class PartEffect:
    """Log effect of a setting on one part of the peak, against the baseline's value."""

    part: str
    log_mean: float
    log_sd: float


def _ratio(knob: Knob, value: KnobValue) -> float | None:
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


def _micro_batch(knob: Knob, value: KnobValue, device: str, contract: Contract) -> PartEffect | None:
    r = _ratio(knob, value)
    # Every activation is per sample: exactly linear in the micro-batch.
    return None if r is None else PartEffect(ACTIVATIONS, math.log(r), 0.05)


def _grad_accum(knob: Knob, value: KnobValue, device: str, contract: Contract) -> PartEffect | None:
    r = _ratio(knob, value)
    if r is None or contract.by_role("micro_batch"):
        return None  # with a micro-batch knob, accumulation follows it and has no effect of its own
    return PartEffect(ACTIVATIONS, -math.log(r), 0.05)


RECOMPUTE_LEVELS = {"off": 0, "selective": 1, "on": 2}
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
            part: str) -> Callable[[Knob, KnobValue, str, Contract], PartEffect | None]:
    def rule(knob: Knob, value: KnobValue, device: str, contract: Contract) -> PartEffect | None:
        levels = table["cuda" if device == "cuda" else "cpu"]
        a, b = canon(value), canon(knob.default)
        if a is None or b is None:
            return None
        (mean, sd), (ref, ref_sd) = levels[a], levels[b]
        return PartEffect(part, mean - ref, max(math.hypot(sd, ref_sd), 0.02))

    return rule


_SHARDING = {
    # ZeRO stage s on d ranks keeps 18 bytes per parameter as 6 + 12/d, 2 + 16/d, 18/d (plus
    # working weights): about these at d = 8 (Rajbhandari et al. 2020; docs/sim.md, "Memory").
    "cuda": {"0": (0.0, 0.0), "1": (-0.8, 0.4), "2": (-1.3, 0.5), "3": (-1.8, 0.6)},
    # On a CPU the runtime is part of the state and is not sharded.
    "cpu": {"0": (0.0, 0.0), "1": (-0.15, 0.3), "2": (-0.3, 0.3), "3": (-0.5, 0.4)},
}


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


def _split(share: float, sd: float) -> Callable[[Knob, KnobValue, str, Contract], PartEffect | None]:
    """A degree dividing ``share`` of the state (on a GPU; half as much on a CPU, whose runtime it
    does not divide)."""
    def rule(knob: Knob, value: KnobValue, device: str, contract: Contract) -> PartEffect | None:
        r = _ratio(knob, value)
        if r is None:
            return None
        s = share if device == "cuda" else share / 2
        return PartEffect(STATE, math.log1p(s * (1 / r - 1)), sd)

    return rule


def _in_flight(stages: float) -> float:
    """The first stage keeps 1 + (p-1)/(p·v) times the activations in flight, about 1 + 1/v."""
    return 1.0 if stages <= 1 else 1.0 + 1.0 / stages


def _virtual_pipeline(knob: Knob, value: KnobValue, device: str, contract: Contract) -> PartEffect | None:
    r = _ratio(knob, value)
    if r is None:
        return None
    return PartEffect(ACTIVATIONS, math.log(_in_flight(float(value)) / _in_flight(float(knob.default))), 0.1)


PART_RULES: dict[str, Callable[[Knob, KnobValue, str, Contract], PartEffect | None]] = {
    "micro_batch": _micro_batch,
    "grad_accum": _grad_accum,
    "activation_checkpointing": _levels(_RECOMPUTE, _recompute_level, ACTIVATIONS),
    "fsdp": _levels(_SHARDING, sharding_stage, STATE),
    # Each stage holds 1/p of the layers, while under 1F1B the first keeps p micro-batches of its
    # l/p layers in flight: the activations stay (Narayanan et al. 2021, Section 2.2).
    "pipeline_parallel": _split(1.0, 0.1),
    # The experts are most of a MoE's parameters (Mixtral: 45 of 47 B).
    "expert_parallel": _split(0.9, 0.2),
    "virtual_pipeline": _virtual_pipeline,
    "sequence_parallel": _levels(_SEQUENCE_PARALLEL, _sequence_parallel, ACTIVATIONS),
}


def part_effect(knob: Knob, value: KnobValue, device: str, contract: Contract) -> PartEffect | None:
    """The effect of ``knob`` at ``value`` on its part of the peak, or None where it scales the whole."""
    rule = PART_RULES.get(knob.role)
    return None if rule is None else rule(knob, value, device, contract)
