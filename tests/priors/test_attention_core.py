"""Selective recomputation priced from the model's shape: its time against none, its memory saving."""

import math
from dataclasses import replace

import pytest

from infrarsi.priors import builtin_table
from infrarsi.priors.attention_core import (
    FUSED_SAVING_SD,
    HEAD_DIM,
    SCORES_KNOWN_SD,
    SCORES_SD,
    scores_saving,
    selective_time,
)
from tests.priors.conftest import knob, make_contract


def _shaped(seq: int, hidden: int = 0, heads: int = 0):
    contract = make_contract([knob("recompute", "activation_checkpointing", "str", "full", ["full", "selective", "none"])])
    return replace(contract, workload=replace(contract.workload, seq_len=seq, hidden=hidden, heads=heads))


def test_selective_recomputation_costs_more_time_at_long_sequences_of_narrow_models():
    """The published point it is set from (Korthikanti et al. 2022, Table 4: the 22B model at 2,048
    tokens, +6.6 %), a wide model at a short sequence (GPT-3 175B: a few percent), a narrow one at a
    long sequence (Llama 2 7B at 4,096: several times that)."""
    assert math.expm1(selective_time(_shaped(2048, 6144, 64))) == pytest.approx(0.066, abs=0.002)
    gpt3 = math.expm1(selective_time(_shaped(2048, 12288, 96)))
    llama = math.expm1(selective_time(_shaped(4096, 4096, 32)))
    assert 0.015 < gpt3 < 0.04 and 0.12 < llama < 0.2
    assert selective_time(_shaped(4096)) is None and selective_time(_shaped(0, 4096, 32)) is None


def test_the_scores_saving_reads_the_model_s_head_width_where_known():
    assumed, assumed_sd = scores_saving(_shaped(4096))
    assert assumed == pytest.approx(-math.log1p(5 * 4096 / (34 * HEAD_DIM))) and assumed_sd == SCORES_SD
    narrow, narrow_sd = scores_saving(_shaped(4096, 4096, 64))  # head width 64: twice the scores' share
    assert narrow == pytest.approx(-math.log1p(5 * 4096 / (34 * 64))) and narrow_sd == SCORES_KNOWN_SD
    assert scores_saving(_shaped(0, 4096, 32)) is None


def test_on_a_gpu_the_time_prior_of_selective_recomputation_follows_the_shape(make_context):
    table = builtin_table(make_context("cuda", contract=_shaped(4096, 4096, 32)))
    selective, full, none = (table.get(f"recompute={v}").time_log_mean for v in ("selective", "full", "none"))
    # Against the baseline's full recomputation: selective's own cost less full's (none's 0).
    assert selective - none == pytest.approx(selective_time(_shaped(4096, 4096, 32)))
    assert none < selective < full == 0.0
    # Full recomputation recomputes the core too: the table's 0.22 above selective, whatever its cost.
    assert full - selective == pytest.approx(0.22)
    unknown = builtin_table(make_context("cuda", contract=_shaped(4096)))
    assert unknown.get("recompute=selective").time_log_mean - unknown.get("recompute=none").time_log_mean == \
        pytest.approx(0.03)
    cpu = builtin_table(make_context("cpu", contract=_shaped(4096, 4096, 32)))
    assert cpu.get("recompute=selective").time_log_mean - cpu.get("recompute=none").time_log_mean == \
        pytest.approx(0.03)


def _fused(contract):
    return replace(contract, workload=replace(contract.workload, attention="fused"))


def test_under_a_fused_kernel_selective_recomputation_saves_nothing_and_costs_only_the_cores_flops(make_context):
    """SDPA or FlashAttention keeps no scores: selective recomputation has nothing to drop, and its
    recomputation is the core's FLOPs alone (the kernel does the softmax inside them)."""
    eager, fused = _shaped(4096, 4096, 32), _fused(_shaped(4096, 4096, 32))
    assert scores_saving(fused) == (0.0, FUSED_SAVING_SD) and scores_saving(eager)[0] < -0.5
    assert 0 < selective_time(fused) < selective_time(eager)
    assert math.expm1(selective_time(fused)) == pytest.approx(4096 / (3 * (6 * 4096 + 4096)))
    table = builtin_table(make_context("cuda", contract=fused))
    selective, none = table.get("recompute=selective"), table.get("recompute=none")
    assert selective.mem_part_log_mean == pytest.approx(none.mem_part_log_mean)


def test_under_a_fused_kernel_the_activations_keep_no_scores():
    from infrarsi.priors.activation_bytes import Shape, activation_bytes

    shape = Shape(seq=2048, hidden=6144, heads=48, layers=40)
    kw = {"micro": 1, "tp": 1, "sequence_parallel": False, "level": "off"}
    assert activation_bytes(shape, **kw, fused_attention=True) == pytest.approx(2048 * 6144 * 40 * 34)
    assert activation_bytes(shape, **kw) > activation_bytes(shape, **kw, fused_attention=True)
