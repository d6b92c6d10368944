"""Built-in beliefs about which part of the peak (the state, the activations) each role scales."""

import math

import pytest

from infrarsi.priors import builtin_table
from infrarsi.priors.memory_parts import sharding_stage
from tests.priors.conftest import knob


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
    # ZeRO 3 shards more than ZeRO 1, which shards more than none: the whole-peak belief reads 1 and 3 alike.
    zero = {v: table.get(f"zero_stage={v}") for v in (0, 2, 3)}
    assert {p.mem_part for p in zero.values()} == {"state"}
    assert zero[0].mem_part_log_mean > 0 > zero[2].mem_part_log_mean > zero[3].mem_part_log_mean
    # Tensor parallelism divides both parts: it scales the whole peak.
    assert table.get("tp=2").mem_part == ""


@pytest.mark.parametrize("value,stage", [(0, "0"), ("3", "3"), ("full_shard", "3"), ("SHARD_GRAD_OP", "2"),
                                         ("no_shard", "0"), (True, "3"), ("zero1", "1"), ("banana", None)])
def test_sharding_stage_reads_deepspeed_and_fsdp_spellings(value, stage):
    assert sharding_stage(value) == stage
