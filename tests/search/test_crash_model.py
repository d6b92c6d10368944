"""Settings that break the job are learned from the crashed trials and stop being proposed."""

import numpy as np

from infrarsi.contract import Knob
from infrarsi.search.crash_model import failure_rates, p_runs
from infrarsi.search.infrarsi_sampler import InfraRSISampler
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import DENSE_MEM, DENSE_TIME, Surface, contract_with, dense_knobs, result
from infrarsi.trials import TrialStatus


def _space() -> SearchSpace:
    return SearchSpace.from_contract(contract_with(dense_knobs()), [])


def test_a_setting_only_failed_trials_held_is_suspected_and_a_shared_one_is_not():
    space = _space()
    base = space.baseline()
    fused = space.with_value(base, "optimizer_impl", "fused")
    broken = space.with_value(fused, "compile", True)
    history = [result(base), result(fused), result(space.with_value(fused, "threads", 1)),
               result(broken, TrialStatus.CRASH)]
    rates = dict(zip(space.setting_keys, failure_rates(space, history), strict=True))
    # Only compile can explain the crash (fused ran clean twice): 1 / (1 + 0.25).
    assert rates["compile=True"] == 0.8 and rates["optimizer_impl=fused"] == 0.0
    compiled_again = space.with_value(broken, "micro_batch_size", 8)
    compiled_alone = space.with_value(base, "compile", True)
    p = p_runs(space, history, space.indicator([compiled_again, fused, compiled_alone]))
    # One failure cannot tell compile from compile with fused: compile alone is still worth a trial.
    assert np.allclose(p, [0.2, 1.0, 1.0])
    # An interaction (every setting of the failed trial ran clean elsewhere) spreads the blame thin.
    both = space.with_value(fused, "threads", 1)
    rates = failure_rates(space, history + [result(both, TrialStatus.CRASH)])
    assert 0 < rates[space.setting_keys.index("threads=1")] < 0.5


def test_failures_that_share_several_settings_do_not_condemn_one_of_them_alone():
    # static_graph crashes under two processes only; every crash also had the fused optimizer.
    space = SearchSpace.from_contract(contract_with([*dense_knobs(), Knob(
        name="static_graph", role="ddp_static_graph", type="bool", default=False, flag="--static_graph",
        flag_style="store_true", domain=[False, True], tunable=True)]), [])
    base = space.baseline()
    graph = space.with_value(space.with_value(base, "static_graph", True), "optimizer_impl", "fused")
    two = space.with_value(graph, "threads", 1)  # stands in for "two processes": never ran clean
    history = [result(base), result(graph)] + [
        result(space.with_value(base, "micro_batch_size", mb)) for mb in (1, 2, 8)] + [
        result(space.with_value(two, "micro_batch_size", mb), TrialStatus.CRASH) for mb in (1, 2, 8)]
    assert failure_rates(space, history)[space.setting_keys.index("threads=1")] == 1.0
    alone = space.with_value(base, "threads", 1)
    again = space.with_value(two, "micro_batch_size", 16)
    assert np.allclose(p_runs(space, history, space.indicator([alone, again])), [1.0, 0.001])


def test_the_sampler_stops_proposing_a_setting_that_keeps_breaking_the_job():
    space = _space()
    # compile=True trips an assert in this job, whatever else is set: a crash after start-up.
    compiled = [c for c in space.all_candidates() if c.knobs["compile"]]
    assert len(compiled) > len(space.all_candidates()) / 3
    for seed in range(3):
        surface = Surface(space, DENSE_TIME, DENSE_MEM, base_peak=0.3 * space.budget_bytes, seed=seed)
        sampler, history = InfraRSISampler(space, seed=seed), []
        while len(history) < 20 and (proposal := sampler.ask(history)) is not None:
            cand = proposal.candidate
            history.append(result(cand, TrialStatus.CRASH) if cand.knobs["compile"] else surface.run(cand))
        crashed = [t for t in history if t.status is TrialStatus.CRASH]
        # Without the crash model: 15-18 of 20 (EI is highest exactly where nothing was ever
        # measured). With it, one or two: seeds count compile's failure wherever it is held
        # (p_runs_each), and expected improvement where its common core is held (p_runs). A first
        # crash shared by four settings that never ran clean leaves compile at even odds, and the
        # time model's pair terms (compile meets micro-batch, threads, dtype…) keep its candidates
        # uncertain enough that expected improvement tried it once more beside another setting
        # in two of these three seeds; never a third time.
        assert 1 <= len(crashed) <= 2, (seed, [space.settings(t.candidate) for t in crashed])
        assert failure_rates(space, history)[space.setting_keys.index("compile=True")] >= 0.5, seed


def test_a_numerics_failure_is_not_blamed_on_a_setting_that_cannot_change_the_numbers():
    space = SearchSpace.from_contract(contract_with([*dense_knobs(), Knob(
        name="log_every", role="logging", type="int", default=10, flag="--log_every", domain=[10, 40, 160],
        tunable=True)]), [])
    base = space.baseline()
    broken = space.with_value(space.with_value(base, "compile", True), "log_every", 160)
    history = [result(base), result(broken, TrialStatus.NUMERICS)]
    rates = dict(zip(space.setting_keys, failure_rates(space, history), strict=True))
    assert rates["compile=True"] == 0.8 and rates["log_every=160"] == 0.0
    # Compile is as suspect beside another logging interval: it is all the failure needs.
    other_interval = space.with_value(broken, "log_every", 40)
    assert np.allclose(p_runs(space, history, space.indicator([other_interval])), [0.2])
    # A crash may come from anything the trial changed: its blame is shared as before.
    rates = dict(zip(space.setting_keys, failure_rates(space, [result(base), result(broken, TrialStatus.CRASH)]),
                     strict=True))
    assert rates["log_every=160"] > 0


def test_the_values_of_a_knob_a_patch_adds_share_its_failures():
    space = SearchSpace.from_contract(contract_with([*dense_knobs(), Knob(
        name="grad_accum_splits", role="grad_accum", type="int", default=1, flag="--grad_accum_splits",
        domain=[1, 2, 4], tunable=True, patch="gradient_accumulation")]), [])
    base = space.baseline()
    history = [result(base), result(space.with_value(base, "grad_accum_splits", 2), TrialStatus.NUMERICS)]
    rates = dict(zip(space.setting_keys, failure_rates(space, history), strict=True))
    # Every split count applies the same patch: a failure at 2 splits is expected at 4.
    assert rates["grad_accum_splits=2"] == rates["grad_accum_splits=4"] == 0.8
    four = space.with_value(base, "grad_accum_splits", 4)
    assert np.allclose(p_runs(space, history, space.indicator([four, base])), [0.2, 1.0])


def test_seeds_avoid_a_setting_that_broke_the_job_whatever_it_broke_beside():
    """bf16 crashes a trainer on this machine: the baseline runs, then a spread-out seed with bf16
    crashes. The next seeds differ from it in several settings (so ``p_runs``'s shared core never
    holds), yet none of them sets bf16 again."""
    space = _space()
    base = space.baseline()
    bf16 = space.with_value(space.with_value(base, "dtype", "bfloat16"), "optimizer_impl", "fused")
    for seed in range(3):
        surface = Surface(space, DENSE_TIME, DENSE_MEM, base_peak=0.3 * space.budget_bytes, seed=seed)
        history = [surface.run(base), result(bf16, TrialStatus.CRASH)]
        sampler = InfraRSISampler(space, seed=seed)
        for _ in range(3):
            proposal = sampler.ask(history)
            if proposal is None or "seed" not in proposal.reason:
                break
            cand = proposal.candidate
            assert cand.knobs["dtype"] != "bfloat16", (seed, space.settings(cand))
            history.append(result(cand, TrialStatus.CRASH) if cand.knobs["dtype"] == "bfloat16" else surface.run(cand))
