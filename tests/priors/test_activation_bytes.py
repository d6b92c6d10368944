"""A GPU's activations from the model's shape: Korthikanti et al. 2022's Table 2, and what the
priors and the memory model make of it."""

import math
from dataclasses import replace

import pytest

from infrarsi.priors import builtin_table
from infrarsi.priors.activation_bytes import Shape, activation_bytes
from infrarsi.priors.memory_parts import (
    RUNTIME_BYTES,
    activation_interaction,
    activation_ratio,
    baseline_activation_share,
)
from tests.priors.conftest import hardware, knob

S, H, A, L = 2048, 6144, 48, 40
SHAPE = Shape(seq=S, hidden=H, heads=A, layers=L)
SCORES = 5 * A * S / H


def _bytes(**kw) -> float:
    return activation_bytes(SHAPE, **{"micro": 1, "tp": 1, "sequence_parallel": False, "level": "off", **kw})


@pytest.mark.parametrize(("kw", "per_layer"), [
    ({}, 34 + SCORES),
    ({"tp": 8}, 10 + 24 / 8 + SCORES / 8),
    ({"tp": 8, "sequence_parallel": True}, (34 + SCORES) / 8),
    ({"tp": 8, "sequence_parallel": True, "level": "selective"}, 34 / 8),
])
def test_a_layer_keeps_table_2s_bytes(kw, per_layer):
    """Table 2, per layer s·b·h·(...): none, tensor parallel, + sequence parallel, + selective
    (whose scores are rebuilt one layer at a time)."""
    working = SCORES / 8 if kw.get("level") == "selective" else 0
    assert _bytes(**kw) == pytest.approx(S * H * (L * per_layer + working))


def test_full_recomputation_keeps_each_layers_input_and_one_layer_at_once():
    assert _bytes(level="on") == pytest.approx(S * H * (L * 2 + 34 + SCORES))
    assert _bytes(level="on", micro=4) == pytest.approx(4 * _bytes(level="on"))


def test_an_interleaved_pipelines_first_stage_keeps_more_micro_batches():
    assert _bytes(pp=4) == pytest.approx(_bytes())
    assert _bytes(pp=4, vpp=2) == pytest.approx(_bytes() * (1 + 3 / 8))


def _megatron(layers: int = 32, experts: bool = False):
    knobs = [knob("micro_batch_size", "micro_batch", "int", 1, [1, 2, 4]),
             knob("recompute", "activation_checkpointing", "str", "full", ["none", "selective", "full"]),
             knob("tp", "tensor_parallel", "int", 8, [1, 2, 4, 8]),
             knob("sp", "sequence_parallel", "bool", False, [False, True]),
             knob("zero_stage", "fsdp", "int", 1, [0, 1, 2, 3])]
    if experts:
        knobs.append(knob("ep", "expert_parallel", "int", 8, [1, 8]))
    from tests.priors.conftest import make_contract
    contract = make_contract(knobs)
    return replace(contract, workload=replace(contract.workload, seq_len=4096, hidden=4096, heads=32, layers=layers,
                                              params=6_700_000_000))


def _gpus(device: str = "cuda"):
    return replace(hardware(device), gpu_count=8) if device == "cuda" else hardware(device)


def test_on_a_gpu_recomputation_is_priced_from_the_shape_and_tensor_parallelism_on_the_state(make_context):
    contract = _megatron()
    table = builtin_table(make_context("cuda", contract=contract, hardware=_gpus()))
    none = table.get("recompute=none")
    assert none.mem_part == "activations"
    assert none.mem_part_log_mean == pytest.approx(math.log(activation_ratio({"activation_checkpointing": "none"},
                                                                             _gpus(), contract)))
    # No recomputation at tp 8: 32 layers of 10 + 24/8 + 5·32·4096/(4096·8) = 33 bytes a token and
    # hidden unit, against full recomputation's 32 inputs of 2 and one layer's 33 at once.
    assert none.mem_part_log_mean == pytest.approx(math.log(32 * 33 / (32 * 2 + 33)))
    tp2 = table.get("tp=2")
    # A quarter of the GPUs' layers each, four times the state, of which ZeRO 1 now shards the
    # optimizer's 12 bytes over the 4 data-parallel ranks tp 2 leaves: (6 + 12/4)/18 of it.
    assert tp2.mem_part == "state" and tp2.mem_part_log_mean == pytest.approx(math.log(4 * (6 + 12 / 4) / 18))


def test_what_the_activations_roles_do_together_beyond_their_own_effects():
    contract, hw = _megatron(), _gpus()
    # Sequence parallelism at the baseline's tp 8 splits the norms eight ways; at tp 1 it does nothing.
    assert activation_interaction({"sequence_parallel": True, "tensor_parallel": 1}, hw, contract) == pytest.approx(
        math.log(activation_ratio({"tensor_parallel": 1}, hw, contract))
        - math.log(activation_ratio({"sequence_parallel": True}, hw, contract)))
    # One setting alone has no interaction; tensor parallelism's whole effect on the activations is one.
    assert activation_interaction({"activation_checkpointing": "none"}, hw, contract) == pytest.approx(0.0)
    assert activation_interaction({"tensor_parallel": 2}, hw, contract) == pytest.approx(
        math.log(activation_ratio({"tensor_parallel": 2}, hw, contract))) != 0


def test_the_baseline_share_of_activations_is_the_formula_against_the_states_18_bytes_and_the_runtime():
    contract, hw = _megatron(), _gpus()
    act = activation_bytes(Shape(4096, 4096, 32, 32), micro=1, tp=8, sequence_parallel=False, level="on")
    state = 18 * 6.7e9 / 8  # ZeRO 1 over one data-parallel rank keeps it all
    assert baseline_activation_share(hw, contract) == pytest.approx(act / (act + state + RUNTIME_BYTES))


@pytest.mark.parametrize("why", ["cpu", "no layers", "experts"])
def test_without_the_shape_on_a_gpu_the_activations_are_not_priced_from_it(why):
    contract = _megatron(layers=0 if why == "no layers" else 32, experts=why == "experts")
    hw = _gpus("cpu" if why == "cpu" else "cuda")
    assert activation_ratio({"activation_checkpointing": "none"}, hw, contract) is None
    assert baseline_activation_share(hw, contract) is None
    assert activation_interaction({"tensor_parallel": 2}, hw, contract) == 0.0
