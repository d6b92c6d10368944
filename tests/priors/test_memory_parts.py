"""Built-in beliefs about which part of the peak (the state, the activations) each role scales."""

import math
from dataclasses import replace

import pytest

from infrarsi.priors import builtin_table
from infrarsi.priors.attention_core import HEAD_DIM
from infrarsi.priors.memory_parts import (
    EXPERT_STATE,
    WORKING_WEIGHTS,
    sharding_stage,
    state_interaction,
    state_ratio,
)
from tests.priors.conftest import hardware, knob


def test_builtin_priors_name_the_part_each_role_scales(make_context, contract_with, device):
    knobs = [knob("mb", "micro_batch", "int", 1, [1, 2, 4, 8]),
             knob("ckpt", "activation_checkpointing", "bool", True, [True, False]),
             knob("pp", "pipeline_parallel", "int", 1, [1, 2, 4]), knob("zero_stage", "fsdp", "int", 1, [0, 1, 2, 3]),
             knob("tp", "tensor_parallel", "int", 8, [1, 2, 4, 8])]
    table = builtin_table(make_context(device, contract=contract_with(knobs)))
    assert table.get("mb=4").mem_part == "activations"
    assert table.get("mb=4").mem_part_log_mean == pytest.approx(math.log(4))
    assert table.get("ckpt=False").mem_part == "activations" and table.get("ckpt=False").mem_part_log_mean > 0
    assert table.get("pp=2").mem_part == "state" and table.get("pp=2").mem_part_log_mean < 0
    assert {table.get(f"zero_stage={v}").mem_part for v in (0, 2, 3)} == {"state"}
    # Tensor parallelism divides both parts: it scales the whole peak.
    assert table.get("tp=2").mem_part == ""


def _zero_table(make_context, contract_with, device, gpus):
    knobs = [knob("zero_stage", "fsdp", "int", 1, [0, 1, 2, 3]), knob("tp", "tensor_parallel", "int", 8, [1, 2, 4, 8])]
    hw = replace(hardware(device), gpu_count=gpus) if device == "cuda" else hardware(device)
    table = builtin_table(make_context(device, contract=contract_with(knobs), hardware=hw))
    return {v: table.get(f"zero_stage={v}").mem_part_log_mean for v in (0, 2, 3)}


def test_zero_stages_shard_the_state_in_order(make_context, contract_with, device):
    """ZeRO 3 shards more than ZeRO 2, which shards more than ZeRO 1 and none: the whole-peak
    belief (sharding on or off) reads 1 and 3 alike."""
    zero = _zero_table(make_context, contract_with, device, gpus=64)
    assert zero[0] > 0 > zero[2] > zero[3]


def test_on_gpus_a_zero_stage_keeps_its_share_of_the_state_at_the_baselines_data_parallel_degree(
        make_context, contract_with):
    # 64 GPUs over tensor-parallel 8: 8 data-parallel ranks. ZeRO 1 keeps 6 + 12/8 of 18 bytes per
    # parameter; ZeRO 3 18/8, plus its gathered working weights.
    zero = _zero_table(make_context, contract_with, "cuda", gpus=64)
    assert zero[0] == pytest.approx(math.log(18 / 7.5))
    assert zero[3] == pytest.approx(math.log((2.25 / 18 + WORKING_WEIGHTS) / (7.5 / 18)))
    # One data-parallel rank has nothing to shard over.
    assert set(_zero_table(make_context, contract_with, "cuda", gpus=8).values()) == {0.0}


@pytest.mark.parametrize("value,stage", [(0, "0"), ("3", "3"), ("full_shard", "3"), ("SHARD_GRAD_OP", "2"),
                                         ("no_shard", "0"), (True, "3"), ("zero1", "1"), ("banana", None)])
def test_sharding_stage_reads_deepspeed_and_fsdp_spellings(value, stage):
    assert sharding_stage(value) == stage


def test_selective_recomputation_sits_between_none_and_full(make_context, contract_with, device):
    knobs = [knob("recompute", "activation_checkpointing", "str", "full", ["none", "selective", "full"])]
    table = builtin_table(make_context(device, contract=contract_with(knobs)))
    none, selective = table.get("recompute=none"), table.get("recompute=selective")
    assert none.time_log_mean < selective.time_log_mean < 0
    assert 0 < selective.mem_log_mean < none.mem_log_mean
    assert 0 < selective.mem_part_log_mean < none.mem_part_log_mean


def test_the_experts_state_is_sharded_only_over_the_ranks_that_hold_the_same_experts(contract_with):
    # 8 GPUs, no tensor or pipeline parallelism: 8 data-parallel ranks. With the experts split 8
    # ways each expert has one rank, so ZeRO 3 saves only on the dense tenth of the state.
    contract = contract_with([knob("zero_stage", "fsdp", "int", 0, [0, 3]),
                              knob("ep", "expert_parallel", "int", 1, [1, 8])])
    hw = replace(hardware("cuda"), gpu_count=8)
    zero3 = (18 / 8 / 18 + WORKING_WEIGHTS)
    assert state_ratio({"fsdp": 3}, hw, contract) == pytest.approx(zero3)
    assert state_ratio({"fsdp": 3, "expert_parallel": 8}, hw, contract) == pytest.approx(
        (1 - EXPERT_STATE) * zero3 + EXPERT_STATE / 8)
    assert state_interaction({"fsdp": 3, "expert_parallel": 8}, hw, contract) > 0
    assert state_interaction({"fsdp": 3, "expert_parallel": 8}, hardware("cpu"), contract) == 0.0


@pytest.mark.parametrize("seq", [0, 512, 4096])
def test_selective_recomputation_saves_the_attention_scores_of_the_sequence(make_context, contract_with, seq):
    """On a GPU selective recomputation drops the scores, 5s/h_d of a layer's 34 + 5s/h_d bytes: the
    longer the sequence, the more it saves against none; with no sequence length, the fixed table.
    Both values are priced against full recomputation, whose own sd they share."""
    knobs = [knob("recompute", "activation_checkpointing", "str", "full", ["full", "selective", "none"])]
    contract = contract_with(knobs)
    contract = replace(contract, workload=replace(contract.workload, seq_len=seq))
    table = builtin_table(make_context("cuda", contract=contract))
    selective, none = table.get("recompute=selective"), table.get("recompute=none")
    saved = none.mem_part_log_mean - selective.mem_part_log_mean
    assert saved == pytest.approx(math.log1p(5 * seq / (34 * HEAD_DIM)) if seq else 1.0)
    assert selective.mem_part_shared_sd == none.mem_part_shared_sd == pytest.approx(none.mem_part_log_sd)
    assert 0 < none.mem_part_shared_sd < selective.mem_part_log_sd
