"""The analytic training model (bench/sim, docs/sim.md): it reproduces the published measurements it
is validated against, and its memory, pipeline, validation, FLOP counting and noise behave as the
papers and its docstrings say. Pure arithmetic: no torch, no GPU."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from bench.sim import validate
from bench.sim.hardware import A100_80GB, H100_SXM, H200, Cluster
from bench.sim.model import STARTUP_PER_DOUBLING_S, Noise, Parallel, Transformer, simulate

GPT_7B = Transformer(layers=32, hidden=4096, heads=32)
GPT_175B = Transformer(layers=96, hidden=12288, heads=96)


def _errors(checks: list[validate.Check]) -> list[tuple[str, float]]:
    return [(c.row.name, round(c.error, 3)) for c in checks]


def test_narayanan_table1_at_least_8_of_10_rows_within_15_percent():
    checks = validate.table1()
    assert len(checks) == 10
    assert all(c.result.ok for c in checks), "every published configuration ran, so it must fit"
    assert sum(c.within for c in checks) >= 8, _errors(checks)


def test_korthikanti_table5_both_arms_within_15_percent_and_every_change_the_right_way():
    checks = validate.table5()
    assert len(checks) == 4
    for pc in checks:
        arms = [pc.full, pc.present]
        assert all(c.result.ok for c in arms), pc.full.row.name
        assert all(c.within for c in arms), _errors(arms)
        assert pc.direction_right, (pc.full.row.name, pc.published_change, pc.modelled_change)


def test_params_follow_narayanan_formula_and_table1_sizes():
    for row in validate.NARAYANAN_TABLE1:
        m = row.model
        layers, h, s, v = m.layers, m.hidden, m.seq, m.vocab
        assert m.params == pytest.approx(12 * layers * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * layers * h)))
        assert m.params / 1e9 == pytest.approx(float(row.name.removesuffix("B")), rel=0.03)


def test_achieved_flops_count_the_paper_formula_with_full_recomputation():
    row = validate.NARAYANAN_TABLE1[6]
    m, par = row.model, row.par
    result = row.simulate()
    batch, s, layers, h, v = par.global_batch, m.seq, m.layers, m.hidden, m.vocab
    flops = 96 * batch * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
    gpus = par.tp * par.pp * par.dp
    assert result.tflops_per_gpu * 1e12 * result.step_s * gpus == pytest.approx(flops)
    # MFU counts three passes, not four (the logits, never recomputed, count three times in both).
    model_flops = 72 * batch * s * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h))
    assert result.mfu * A100_80GB.peak_flops * result.step_s * gpus == pytest.approx(model_flops)


def test_selective_recomputation_repeats_only_the_attention_scores_and_values():
    row = validate.KORTHIKANTI_TABLE5[1].present
    m, par = row.model, row.par
    result = row.simulate()
    batch, s, layers, h, v = par.global_batch, m.seq, m.layers, m.hidden, m.vocab
    model_flops = 72 * batch * s * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h))
    executed = result.tflops_per_gpu * 1e12 * result.step_s * par.tp * par.pp * par.dp
    assert executed == pytest.approx(model_flops + 4 * batch * s * s * layers * h)


def test_breakdown_adds_up_to_the_step():
    for c in validate.table1():
        assert c.result.breakdown.total == pytest.approx(c.result.step_s)


def test_memory_falls_with_each_zero_stage():
    peaks = [simulate(GPT_7B, Parallel(dp=8, micro_batch=2, global_batch=64, zero=z, recompute="full"),
                      Cluster(A100_80GB, 8)).peak_bytes for z in (0, 1, 2, 3)]
    assert peaks == sorted(peaks, reverse=True) and len(set(peaks)) == 4


def test_memory_falls_with_recomputation_and_with_sequence_parallel():
    def peak(recompute: str, sp: bool = False) -> float:
        par = Parallel(tp=8, pp=8, dp=1, global_batch=64, recompute=recompute, sequence_parallel=sp)
        return simulate(GPT_175B, par, Cluster(A100_80GB, 64)).peak_bytes

    assert peak("none") > peak("selective") > peak("full")
    assert peak("none") > peak("none", sp=True)
    assert peak("selective") > peak("selective", sp=True)


def test_oom_exactly_above_hbm():
    par = Parallel(tp=8, dp=1, global_batch=8, recompute="full")
    big = simulate(GPT_175B, par, Cluster(A100_80GB, 8))
    assert big.oom and not big.ok and "GiB" in big.reason
    assert big.peak_bytes > A100_80GB.hbm_bytes and math.isfinite(big.step_s)

    fits = simulate(GPT_7B, par, Cluster(A100_80GB, 8))
    assert fits.ok
    for hbm, status in ((int(fits.peak_bytes) - 1, "oom"), (int(fits.peak_bytes) + 1, "ok")):
        assert simulate(GPT_7B, par, Cluster(replace(A100_80GB, hbm_bytes=hbm), 8)).status == status


def test_no_recomputation_does_not_fit_the_largest_korthikanti_models():
    for pair in validate.KORTHIKANTI_TABLE5[2:]:
        par = replace(pair.full.par, recompute="none")
        assert simulate(pair.full.model, par, Cluster(A100_80GB, par.tp * par.pp)).oom, pair.full.row.name


def test_bubble_vanishes_without_pipeline_and_shrinks_with_interleaving():
    flat = simulate(GPT_7B, Parallel(tp=8, dp=4, global_batch=64), Cluster(A100_80GB, 32))
    assert flat.ok and flat.breakdown.bubble == 0 and flat.breakdown.pp_comm == 0

    def bubble_share(vpp: int) -> float:
        r = simulate(GPT_7B, Parallel(tp=8, pp=4, global_batch=16, vpp=vpp), Cluster(A100_80GB, 32))
        return r.breakdown.bubble / (r.breakdown.compute + r.breakdown.tp_comm)

    assert bubble_share(1) == pytest.approx(3 / 16)  # (p-1)/(v·m)
    assert bubble_share(2) == pytest.approx(3 / 32)


@pytest.mark.parametrize(("model", "par", "gpus", "words"), [
    (GPT_7B, Parallel(tp=2, pp=2, dp=2, global_batch=8), 16, "tp*pp*dp = 2*2*2 = 8"),
    (Transformer(layers=32, hidden=4080, heads=30), Parallel(tp=8, global_batch=8), 8, "heads 30 are not divisible by tp 8"),
    (GPT_7B, Parallel(pp=3, dp=1, global_batch=6), 3, "layers 32 are not divisible by pp 3"),
    (GPT_7B, Parallel(pp=2, vpp=32, global_batch=8), 2, "pp*vpp = 64"),
    (GPT_7B, Parallel(dp=8, micro_batch=4, global_batch=48), 8, "not a multiple of micro_batch*dp = 32"),
    (GPT_7B, Parallel(pp=4, dp=2, global_batch=8, zero=2), 8, "ZeRO stage 2"),
    (GPT_7B, Parallel(dp=2, ep=2, global_batch=8), 2, "needs a mixture of experts"),
])
def test_invalid_configurations_say_why(model, par, gpus, words):
    result = simulate(model, par, Cluster(A100_80GB, gpus))
    assert result.status == "invalid" and words in result.reason
    assert math.isnan(result.step_s) and result.peak_bytes == 0


def test_sequence_parallel_is_a_no_op_without_tensor_parallel():
    par = Parallel(dp=8, global_batch=64, recompute="selective")
    assert simulate(GPT_7B, par, Cluster(H100_SXM, 8)) == simulate(
        GPT_7B, replace(par, sequence_parallel=True), Cluster(H100_SXM, 8))


def test_expert_parallel_splits_expert_memory():
    moe = Transformer(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, gated=True, experts=8, top_k=2,
                      seq=4096, vocab=32000)

    def run(ep: int):
        return simulate(moe, Parallel(dp=8, ep=ep, global_batch=64, zero=1, recompute="full"), Cluster(H200, 8))

    one, eight = run(1), run(8)
    assert one.oom and eight.ok
    assert eight.peak_bytes < one.peak_bytes / 2
    assert eight.breakdown.ep_comm > 0 and one.breakdown.ep_comm == 0


def test_noise_draws_the_cv_asked_for_and_repeats_with_its_seed():
    noise = Noise(cv=0.05)
    draws = noise.draw(2.0, np.random.default_rng(7), size=200_000)
    assert draws.mean() == pytest.approx(2.0, rel=0.002)
    assert draws.std() / draws.mean() == pytest.approx(0.05, rel=0.02)
    assert (draws > 0).all()
    again = noise.draw(2.0, np.random.default_rng(7), size=200_000)
    assert np.array_equal(draws, again)
    assert noise.draw(2.0, np.random.default_rng(7)) == draws[0]


def test_startup_grows_with_the_cluster_at_the_same_state_per_gpu():
    def startup(dp: int) -> float:
        return simulate(GPT_7B, Parallel(tp=8, dp=dp, global_batch=8, recompute="full"),
                        Cluster(A100_80GB, 8 * dp)).startup_s

    assert startup(1) > 0
    assert startup(2) - startup(1) == pytest.approx(STARTUP_PER_DOUBLING_S)
