"""Which part of the peak each role's memory scales, and by how much: the structure of a peak.

A training job's peak is a sum of parts that scale with different knobs: the state (weights,
gradients, optimizer state, and on a CPU the runtime) divided by the pipeline stages and by
sharding, and the activations, linear in the micro-batch and cut by recomputation and sequence
parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", Table 2; Rajbhandari et al. 2020, "ZeRO"; docs/sim.md, "Memory"). A whole-peak effect
(``Prior.mem_log_mean``) is right only at the baseline's mix of the two: micro-batch 8 costs little
under full recomputation and a lot without it. So a role below gives its effect on its own part,
and the search's memory model (``infrarsi.search.memory_model``) adds the parts, fitting their mix
from the trials. Roles not here (dtype, compile) scale the whole peak, and so does tensor
parallelism, which divides both parts, unless the model's shape gives the activations
(``activation_ratio``, ``infrarsi.priors.activation_bytes``): its rule then prices the state, and
what it and the other activation roles do to the activations together is a known offset
(``activation_interaction``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from infrarsi.contract import Contract, Knob, KnobValue
from infrarsi.knobs.attention import FUSED
from infrarsi.priors.activation_bytes import activation_bytes, model_shape
from infrarsi.priors.attention_core import scores_saving

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
    shared_sd: float = 0.0
    """Of ``log_sd``, the sd of the baseline value's own level, which every value of the knob is
    measured against: their effects move together by it (``_levels``)."""


def _positive(value: KnobValue | None) -> float | None:
    """``value`` as a positive number (not a boolean), or None."""
    if value is None or isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def value_ratio(knob: Knob, value: KnobValue) -> float | None:
    """``value`` over the knob's default, where both are positive numbers (not booleans)."""
    v, d = _positive(value), _positive(knob.default)
    return None if v is None or d is None else v / d


def _text(value: KnobValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip().lower().replace("-", "_").replace(" ", "_")


SHAPED_SD = 0.1
"""Spread of an activation effect the shape gives: Table 2's 24 bytes are 24-26 for dense models
with gated MLPs or grouped key/value heads."""
ACTIVATION_ROLES = ("activation_checkpointing", "tensor_parallel", "sequence_parallel", "pipeline_parallel",
                    "virtual_pipeline")
"""The roles whose values together decide a GPU's activations beyond the micro-batch's factor."""
ACTIVATION_PARTS = ("activation_checkpointing", "sequence_parallel", "virtual_pipeline")
"""Of those, the roles priced on the activations alone; tensor and pipeline parallelism are priced
on the state, their effect on the activations left to ``activation_interaction``."""


_Absent = TypeVar("_Absent", bound=KnobValue | None)


def _value(values: Mapping[str, KnobValue], contract: Contract, role: str, absent: _Absent) -> KnobValue | _Absent:
    """The role's value in ``values``, else its knob's default, else ``absent`` (the role has no knob)."""
    knobs = contract.by_role(role)
    return values[role] if role in values else knobs[0].default if knobs else absent


def _activations(values: Mapping[str, KnobValue], hw: Hardware, contract: Contract) -> float | None:
    """A GPU's activation bytes with the roles at ``values`` and the rest at the baseline's; None off
    a GPU, without the model's shape, for a mixture of experts (an expert-parallel knob: its routed
    copies of the MLP's tensors are not in the contract), or where a value is no degree."""
    shape = model_shape(contract)
    if hw.device != "cuda" or shape is None or contract.by_role("expert_parallel"):
        return None
    micro, tp, pp, vpp = (_positive(_value(values, contract, role, 1)) for role in
                          ("micro_batch", "tensor_parallel", "pipeline_parallel", "virtual_pipeline"))
    if micro is None or tp is None or pp is None or vpp is None:
        return None
    return activation_bytes(shape, micro=micro, tp=tp, pp=pp, vpp=vpp,
                            sequence_parallel=_sequence_parallel(_value(values, contract, "sequence_parallel",
                                                                        False)) == "on",
                            level=recompute_level(_value(values, contract, "activation_checkpointing", "off")),
                            fused_attention=contract.workload.attention == FUSED)


def activation_ratio(values: Mapping[str, KnobValue], hw: Hardware, contract: Contract) -> float | None:
    """A GPU's activations with the roles at ``values`` over the baseline's (``activation_bytes``)."""
    a, b = _activations(values, hw, contract), _activations({}, hw, contract)
    return None if a is None or b is None else a / b


def activation_interaction(values: Mapping[str, KnobValue], hw: Hardware, contract: Contract) -> float:
    """What ``values`` do to the log activations beyond the effects the activation parts price alone:
    sequence parallelism splits the norms over tp ranks, full recomputation's saving grows with tp,
    and tensor parallelism's split of them is here whole."""
    whole = activation_ratio(values, hw, contract)
    own = [activation_ratio({role: v}, hw, contract) for role, v in values.items() if role in ACTIVATION_PARTS]
    if whole is None or None in own:
        return 0.0
    return math.log(whole) - sum(math.log(o) for o in own if o is not None)


RUNTIME_BYTES = 2 * 2**30
"""What a GPU holds that no knob moves: the CUDA context, NCCL's buffers, cuBLAS's workspaces."""


def baseline_activation_share(hw: Hardware, contract: Contract) -> float | None:
    """The activations' share of the baseline's peak from the shape: the formula's bytes against the
    18 bytes a parameter of state the layout keeps and ``RUNTIME_BYTES``; None without a micro-batch
    knob or the parameter count (a dense model's is about 12·l·h²; a mixture of experts needs the
    probe's)."""
    w = contract.workload
    params = w.params or (0 if contract.by_role("expert_parallel") else 12 * w.layers * w.hidden**2)
    act, layout = _activations({}, hw, contract), _layout({}, hw, contract)
    if act is None or layout is None or not params or not contract.by_role("micro_batch"):
        return None
    state = 18.0 * params * layout + RUNTIME_BYTES
    return act / (act + state)


def _shaped(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
    """An activation part's effect from the shape, at the baseline's other values; None without it."""
    ratio = activation_ratio({knob.role: value}, hw, contract)
    return None if ratio is None else PartEffect(ACTIVATIONS, math.log(ratio), SHAPED_SD if value != knob.default
                                                 else 0.02)


def _micro_batch(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
    r = value_ratio(knob, value)
    # Every activation is per sample: exactly linear in the micro-batch.
    return None if r is None else PartEffect(ACTIVATIONS, math.log(r), 0.05)


def _grad_accum(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
    r = value_ratio(knob, value)
    if r is None or contract.by_role("micro_batch"):
        return None  # with a micro-batch knob, accumulation follows it and has no effect of its own
    return PartEffect(ACTIVATIONS, -math.log(r), 0.05)


LevelTable = dict[str, tuple[float, float]]
"""Each level's log effect on its part and sd, against a reference level."""
_RECOMPUTE = {
    # Selective drops the attention scores (5as/h of 34 + 5as/h bytes per token and hidden unit);
    # full keeps each layer's input, 2 of them, plus one layer's while it runs.
    "cuda": {"off": (0.0, 0.0), "selective": (-1.0, 0.6), "on": (-3.0, 0.8)},
    # On a CPU, small models at short sequences: this project measured -11% peak RSS with
    # checkpointing at ~30% activations (docs/measured.md), about -0.5 on the activations.
    "cpu": {"off": (0.0, 0.0), "selective": (-0.2, 0.3), "on": (-0.5, 0.4)},
}
FULL_UNDER_SELECTIVE = (-2.0, 0.6)
"""Full against selective recomputation: a layer's 2-byte input against its 34, plus one layer's
activations while it recomputes (at 32-80 layers, -1.5 to -2.8)."""


def _by_device(table: dict[str, LevelTable]) -> Callable[[Hardware, Contract], LevelTable]:
    return lambda hw, contract: table["cuda" if hw.device == "cuda" else "cpu"]


def _recompute(hw: Hardware, contract: Contract) -> LevelTable:
    """The recomputation levels; on a GPU with the sequence length known, selective's saving is the
    attention scores' (``attention_core.scores_saving``): twice as large in log at 4,096 tokens as at 512."""
    saving = scores_saving(contract) if hw.device == "cuda" else None
    if saving is None:
        return _by_device(_RECOMPUTE)(hw, contract)
    (selective, sd), (full, full_sd) = saving, FULL_UNDER_SELECTIVE
    return {"off": (0.0, 0.0), "selective": (selective, sd), "on": (selective + full, math.hypot(sd, full_sd))}


def recompute_level(value: KnobValue) -> str:
    """Off, selective (the attention core only) or on (every layer) for a recomputation setting."""
    text = _text(value)
    if text in ("", "0", "false", "off", "no", "none", "disable", "disabled"):
        return "off"
    return "selective" if "selective" in text else "on"


def _levels(table: Callable[[Hardware, Contract], LevelTable], canon: Callable[[KnobValue], str | None],
            part: str) -> Rule:
    def rule(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
        levels = table(hw, contract)
        a, b = canon(value), canon(knob.default)
        if a is None or b is None:
            return None
        if (shaped := _shaped(knob, value, hw, contract)) is not None:
            return shaped
        (mean, sd), (ref, ref_sd) = levels[a], levels[b]
        return PartEffect(part, mean - ref, max(math.hypot(sd, ref_sd), 0.02), ref_sd)

    return rule


_SHARDING_CPU = {"0": (0.0, 0.0), "1": (-0.15, 0.3), "2": (-0.3, 0.3), "3": (-0.5, 0.4)}
"""On a CPU the runtime is part of the state and is not sharded."""
REPLICATED = {"0": 18.0, "1": 6.0, "2": 2.0, "3": 0.0}
"""Bytes per parameter each data-parallel rank keeps whole at each ZeRO stage, of Megatron's 18
(bf16 weight 2, fp32 gradient 4, fp32 master weight and Adam's moments 12); the rest is divided
over the d ranks (Rajbhandari et al. 2020; docs/sim.md, "Memory")."""
WORKING_WEIGHTS = 0.05
"""ZeRO 3's gathered layers and prefetch buffers, as a share of the unsharded state, where the
model's layer count is not known; with it, two layers' bf16 weights (the one running and the one
prefetched: ``_working``)."""
EXPERT_STATE = 0.9
"""The experts' share of a MoE's state (Mixtral: 45 of 47 B parameters)."""
LAYOUT_ROLES = ("fsdp", "tensor_parallel", "pipeline_parallel", "expert_parallel")
"""The roles whose values together decide the state a GPU keeps (``state_ratio``)."""


def _working(contract: Contract) -> float:
    """ZeRO 3's unsharded working weights, in units of the whole state (``WORKING_WEIGHTS``)."""
    layers = contract.workload.layers
    return 2 * 2 / (18 * layers) if layers else WORKING_WEIGHTS


def _state_kept(stage: str, d: float, working: float) -> float:
    replicated = REPLICATED[stage]
    return (replicated + (18 - replicated) / d) / 18 + (working if stage == "3" and d > 1 else 0.0)


def _layout(values: Mapping[str, KnobValue], hw: Hardware, contract: Contract) -> float | None:
    """The state one GPU keeps, in units of the whole model's, with the layout roles at ``values``
    and the rest at the baseline's (a role without a knob: degree 1, no sharding)."""
    def value(role: str) -> KnobValue | None:
        return _value(values, contract, role, None)

    t, p, e = (1.0 if (v := value(role)) is None else _positive(v)
               for role in ("tensor_parallel", "pipeline_parallel", "expert_parallel"))
    if t is None or p is None or e is None:
        return None
    fsdp = value("fsdp")
    stage = "0" if fsdp is None else sharding_stage(fsdp)
    if stage is None:
        return None
    experts = EXPERT_STATE if contract.by_role("expert_parallel") else 0.0
    d = max(hw.gpu_count / (t * p), 1.0)
    # The experts' state is sharded over the d/e ranks that hold the same experts.
    working = _working(contract)
    return ((1 - experts) * _state_kept(stage, d, working)
            + experts * _state_kept(stage, max(d / e, 1.0), working) / e) / (t * p)


def state_ratio(values: Mapping[str, KnobValue], hw: Hardware, contract: Contract) -> float | None:
    """The state per GPU with the layout roles (``LAYOUT_ROLES``) at ``values`` over the baseline's,
    on GPUs: a GPU holds 1/(tp·pp) of the layers, of their experts 1/ep, and of the 18 bytes per
    parameter what ZeRO's stage keeps over the data-parallel ranks, d = gpus/(tp·pp) (d/ep for the
    experts). None off a GPU, or where a value is no layout."""
    if hw.device != "cuda" or not hw.gpu_count:
        return None
    a, b = _layout(values, hw, contract), _layout({}, hw, contract)
    return None if a is None or b is None else a / b


def state_interaction(values: Mapping[str, KnobValue], hw: Hardware, contract: Contract) -> float:
    """What the layout ``values`` do to the log state beyond the sum of each one's own effect: under
    ZeRO, tp 8 -> 2 costs the state nothing at stage 3 and four times as much at stage 0."""
    whole = state_ratio(values, hw, contract)
    own = [state_ratio({role: v}, hw, contract) for role, v in values.items()]
    if whole is None or None in own:
        return 0.0
    return math.log(whole) - sum(math.log(o) for o in own if o is not None)


def _sharding(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
    a, b = sharding_stage(value), sharding_stage(knob.default)
    if a is None or b is None:
        return None
    ratio = state_ratio({knob.role: value}, hw, contract)
    if ratio is None:
        (mean, sd), (ref, ref_sd) = _SHARDING_CPU[a], _SHARDING_CPU[b]
        return PartEffect(STATE, mean - ref, max(math.hypot(sd, ref_sd), 0.02))
    # Exact at the baseline's layout; ``state_interaction`` holds what another layout changes.
    return PartEffect(STATE, math.log(ratio), 0.3 if a != b else 0.02)


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


def _tensor_parallel(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
    """With the activations known from the shape, the degree's effect on the state alone (the
    activations' is in ``activation_interaction``); without them, on the whole peak (None)."""
    if activation_ratio({}, hw, contract) is None or value_ratio(knob, value) is None:
        return None
    ratio = state_ratio({knob.role: value}, hw, contract)
    return None if ratio is None else PartEffect(STATE, math.log(ratio), 0.1)


def _split(share: float, sd: float) -> Rule:
    """A degree dividing the state: on a GPU as ``state_ratio`` has it, on a CPU ``share`` / 2 of it
    (the runtime, which it does not divide, is the rest)."""
    def rule(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
        r = value_ratio(knob, value)
        if r is None:
            return None
        ratio = state_ratio({knob.role: value}, hw, contract)
        if ratio is not None:
            return PartEffect(STATE, math.log(ratio), sd)
        return PartEffect(STATE, math.log1p(share / 2 * (1 / r - 1)), sd)

    return rule


def in_flight(stages: float) -> float:
    """The first stage keeps 1 + (p-1)/(p·v) times the activations in flight, about 1 + 1/v."""
    return 1.0 if stages <= 1 else 1.0 + 1.0 / stages


def _virtual_pipeline(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
    r = value_ratio(knob, value)
    if r is None:
        return None
    if (shaped := _shaped(knob, value, hw, contract)) is not None:
        return shaped
    return PartEffect(ACTIVATIONS, math.log(in_flight(float(value)) / in_flight(float(knob.default))), 0.1)


PART_RULES: dict[str, Rule] = {
    "micro_batch": _micro_batch,
    "grad_accum": _grad_accum,
    "activation_checkpointing": _levels(_recompute, recompute_level, ACTIVATIONS),
    "fsdp": _sharding,
    # Each stage holds 1/p of the layers, while under 1F1B the first keeps p micro-batches of its
    # l/p layers in flight: the activations stay (Narayanan et al. 2021, Section 2.2).
    "pipeline_parallel": _split(1.0, 0.1),
    "tensor_parallel": _tensor_parallel,
    "expert_parallel": _split(EXPERT_STATE, 0.2),
    "virtual_pipeline": _virtual_pipeline,
    "sequence_parallel": _levels(_by_device(_SEQUENCE_PARALLEL), _sequence_parallel, ACTIVATIONS),
}


def part_effect(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> PartEffect | None:
    """The effect of ``knob`` at ``value`` on its part of the peak, or None where it scales the whole."""
    rule = PART_RULES.get(knob.role)
    return None if rule is None else rule(knob, value, hw, contract)
