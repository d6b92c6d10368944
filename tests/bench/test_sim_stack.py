"""Held-out stacks (bench/sim/stack.py): each difference from the formulas the priors share moves
the ground truth the way its real counterpart does, and the in-sample model is unchanged by them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from bench.sim.hardware import H100_SXM, Cluster
from bench.sim.model import Parallel, Transformer, simulate
from bench.sim.space import SPACES
from bench.sim.stack import HELD_OUT, IN_SAMPLE, SCALE_RANGE, Stack, perturbed

GPT_7B = Transformer(layers=32, hidden=4096, heads=32, seq=4096)
PAR = Parallel(tp=2, pp=1, dp=4, micro_batch=2, global_batch=64, recompute="selective")
CLUSTER = Cluster(H100_SXM, 8)


def _sim(stack: Stack, par: Parallel = PAR, cluster: Cluster = CLUSTER):
    return simulate(GPT_7B, par, cluster, stack)


def test_the_default_stack_is_the_in_sample_model():
    assert _sim(IN_SAMPLE) == simulate(GPT_7B, PAR, CLUSTER)


def test_flash_attention_keeps_no_scores_so_selective_recomputation_saves_nothing():
    def act(stack: Stack, recompute: str) -> float:
        return _sim(stack, replace(PAR, recompute=recompute)).memory.activations

    flash = Stack(flash_attention=True)
    assert act(IN_SAMPLE, "none") > act(IN_SAMPLE, "selective")
    assert act(flash, "none") == act(flash, "selective") < act(IN_SAMPLE, "selective")
    assert _sim(flash).step_s < _sim(IN_SAMPLE).step_s  # no score traffic at memory speed


def test_fragmentation_and_buffers_add_memory_tiles_slow_odd_shapes_nodes_slow_the_start():
    base = _sim(IN_SAMPLE)
    assert _sim(Stack(fragmentation=0.25)).memory.activations > base.memory.activations
    assert _sim(Stack(comm_buffer_bytes=2**30)).memory.overhead == base.memory.overhead + 2 * 2**30  # tp, dp groups
    assert _sim(Stack(gemm_tile=256)).step_s >= base.step_s
    two_nodes = Cluster(H100_SXM, 16)
    par = replace(PAR, dp=8, global_batch=128)
    assert (_sim(Stack(startup_per_node_s=20.0), par, two_nodes).startup_s
            == _sim(IN_SAMPLE, par, two_nodes).startup_s + 40.0)


def test_the_fuzzy_edge_differs_by_configuration_and_only_takes_memory():
    edge = Stack(oom_edge=0.12)
    shares = {edge.usable_share(repr(replace(PAR, micro_batch=b, recompute=r)))
              for b in (1, 2, 4) for r in ("none", "selective", "full")}
    assert len(shares) > 3 and all(0.88 <= s <= 1.0 for s in shares)
    # Each configuration on a GPU whose datasheet memory it fills to 97%: the edge takes up to 12%.
    outcomes = []
    for c in (replace(PAR, micro_batch=b, recompute=r) for b in (1, 2, 4) for r in ("none", "selective", "full")):
        snug = Cluster(replace(H100_SXM, hbm_bytes=int(_sim(IN_SAMPLE, c).peak_bytes / 0.97)), 8)
        outcomes.append((_sim(edge, c, snug).ok, _sim(IN_SAMPLE, c, snug).ok))
    assert all(ok_in for _, ok_in in outcomes)
    assert any(not ok_edge for ok_edge, _ in outcomes) and any(ok_edge for ok_edge, _ in outcomes)


def test_stragglers_have_a_heavy_tail():
    steps = np.ones(20_000)
    slowed = Stack(straggler_tail=0.08).straggled(steps, np.random.default_rng(0))
    assert 0.06 < np.mean(slowed > 1) < 0.10 and slowed.max() > 3.0


def test_a_perturbed_stack_draws_every_constant_within_its_range_and_moves_the_optimum_table():
    stack = perturbed(3)
    assert set(stack.scale) == set(SCALE_RANGE)
    assert all(lo <= stack.scale[k] <= hi for k, (lo, hi) in SCALE_RANGE.items())
    assert perturbed(3) == stack and perturbed(4) != stack


def test_a_held_out_space_tells_the_priors_what_its_code_calls():
    flash = replace(SPACES["7b-8xh100"], stack=HELD_OUT["flash attention"])
    assert flash.contract().workload.attention == "fused"
    assert SPACES["7b-8xh100"].contract().workload.attention == "eager"
