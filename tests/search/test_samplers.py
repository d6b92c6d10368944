"""Samplers: never repeat a measured candidate; InfraRSI beats random on a known surface."""

import numpy as np
import pytest

from infrarsi.priors.types import Prior, PriorTable
from infrarsi.search.infrarsi_sampler import SEED_P_FITS, InfraRSISampler
from infrarsi.search.peer_samplers import BatchFinderSampler, GreedySampler, PriorsOnlySampler, RandomSampler
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import DENSE_MEM, DENSE_TIME, Surface, contract_with, dense_knobs, result
from infrarsi.trials import TrialStatus


def _space(patches=("fused_qkv", "flash_mlp")) -> SearchSpace:
    return SearchSpace.from_contract(contract_with(dense_knobs()), list(patches))


def _surface(space, seed=0, base_peak=0.5):
    return Surface(space, DENSE_TIME, DENSE_MEM, base_peak=base_peak * space.budget_bytes, seed=seed)


SAMPLERS = {
    "infrarsi": lambda space: InfraRSISampler(space),
    "random": lambda space: RandomSampler(space),
    "greedy": lambda space: GreedySampler(space),
    "batch_finder": lambda space: BatchFinderSampler(space),
    "priors": lambda space: PriorsOnlySampler(space),
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_never_proposes_a_measured_candidate(name):
    space = _space(patches=())
    surface = _surface(space)
    # History starts with failures that must not be retried: an OOM, a crash, a numerics break.
    base = space.baseline()
    history = [
        result(space.with_value(base, "micro_batch_size", 16), TrialStatus.OOM),
        result(space.with_value(base, "compile", True), TrialStatus.CRASH),
        result(space.with_value(base, "dtype", "bfloat16"), TrialStatus.NUMERICS, step=20.0),
    ]
    sampler = SAMPLERS[name](space)
    for _ in range(25):
        proposal = sampler.ask(history)
        if proposal is None:  # only InfraRSI may stop early, once nothing untried is worth a trial
            assert name == "infrarsi" and sampler.stop_reason.startswith("converged"), name
            break
        assert space.is_valid(proposal.candidate)
        assert proposal.candidate.key() not in {t.candidate.key() for t in history}
        history.append(surface.run(proposal.candidate))


@pytest.mark.parametrize("name", SAMPLERS)
def test_returns_none_once_the_space_is_exhausted(name):
    space = SearchSpace.from_contract(contract_with(dense_knobs()[:2]), [])  # micro-batch x threads: 10
    surface = _surface(space, base_peak=0.1)
    sampler, history = SAMPLERS[name](space), []
    while (proposal := sampler.ask(history)) is not None:
        history.append(surface.run(proposal.candidate))
        assert len(history) <= space.size()
    if getattr(sampler, "stop_reason", "").startswith("converged"):
        assert len(history) < space.size()
    else:
        assert len(history) == space.size()


def test_infrarsi_stops_once_nothing_untried_is_worth_a_trial_having_found_the_optimum():
    space = _space()  # 960 candidates
    for seed in range(3):
        surface, sampler, history = _surface(space, seed=seed), InfraRSISampler(space, seed=seed), []
        while len(history) < 40 and (proposal := sampler.ask(history)) is not None:
            history.append(surface.run(proposal.candidate))
        assert len(history) < 40 and sampler.stop_reason.startswith("converged: the most promising untried"), seed
        assert "chance of gaining 1% of job time, below 5%" in sampler.stop_reason
        found = min(surface.job_s(t.candidate) for t in history if t.ok)
        assert found == surface.job_s(surface.optimum()), seed


@pytest.mark.parametrize("banked", [True, False])
def test_seeds_spread_out_after_the_baseline_unless_a_bank_seed_ran_faster(banked):
    """A bank seed comes first, then the baseline; one faster than the baseline has done what the
    spread-out seeds are for, and expected improvement goes on from it. Without a bank the seeds
    spread out."""
    space = _space()
    # Memory to spare: past the first two trials only a sure fit is worth a seed.
    surface = _surface(space, base_peak=0.1)
    bank = space.with_value(space.with_value(space.baseline(), "micro_batch_size", 8), "threads", 2)
    assert surface.job_s(bank) < surface.job_s(space.baseline())
    sampler, history = InfraRSISampler(space, seeds=[bank] if banked else [], n_initial=5), []
    proposals = []
    for _ in range(5):
        proposals.append(sampler.ask(history))
        history.append(surface.run(proposals[-1].candidate))
    assert [t.candidate.key() for t in history[:1 + banked]] == [bank.key()] * banked + [space.baseline().key()]
    seeds = [i for i, p in enumerate(proposals) if p.reason == "prior-guided diverse seed"]
    if banked:
        assert not seeds and {p.reason for p in proposals[2:]} == {"expected improvement x P(fits) x P(runs)"}
        return
    assert seeds, [p.reason for p in proposals]
    ind = space.indicator([t.candidate for t in history])
    gaps = np.abs(ind[:, None] - ind[None]).sum(-1)
    # No prior-guided seed is a one-setting tweak of an earlier trial.
    assert all(gaps[i, :i].min() >= 3 for i in seeds), gaps


def test_past_two_runs_a_seed_is_only_a_sure_fit():
    # Half the budget used: spread-out candidates are likely fits, few sure ones. Once two trials
    # have run a seed is optional, and one that may run out of memory teaches the time model nothing.
    space = _space()
    surface, sampler, history = _surface(space), InfraRSISampler(space, n_initial=6), []
    for _ in range(6):
        proposal = sampler.ask(history)
        if proposal.reason == "prior-guided diverse seed" and sum(t.ok for t in history) >= 2:
            assert proposal.predicted["p_fits"] >= SEED_P_FITS, proposal
        history.append(surface.run(proposal.candidate))


def test_a_seed_the_models_already_call_slower_than_the_best_run_is_left_to_expected_improvement():
    space = _space(patches=())
    surface = _surface(space)
    # Three settings make the job faster, every other one slower: every candidate 3 settings away
    # from both the baseline and the best is expected slower than the best.
    fast = {"micro_batch_size": 16, "activation_checkpointing": True, "optimizer_impl": "fused"}
    best = space.baseline()
    for knob, value in fast.items():
        best = space.with_value(best, knob, value)
    faster = set(space.settings(best))
    priors = PriorTable.of([Prior(key=k, time_log_mean=-0.3 if k in faster else 1.0, time_log_sd=0.05,
                                  mem_log_mean=0.0, mem_log_sd=0.1, source="test") for k in space.setting_keys])
    history = [surface.run(space.baseline()), surface.run(best)]
    proposal = InfraRSISampler(space, priors).ask(history)
    assert proposal.reason == "expected improvement x P(fits) x P(runs)", proposal


def _trials_to_optimum(sampler, surface, budget):
    optimum, history = surface.optimum().key(), []
    for i in range(budget):
        proposal = sampler.ask(history)
        if proposal.candidate.key() == optimum:
            return i + 1
        history.append(surface.run(proposal.candidate))
    return budget + 1


def test_infrarsi_finds_the_optimum_in_fewer_trials_than_random():
    space = _space()  # 960 candidates
    budget, seeds = 30, range(4)
    ours = [_trials_to_optimum(InfraRSISampler(space, seed=s), _surface(space, seed=s), budget) for s in seeds]
    rand = [_trials_to_optimum(RandomSampler(space, seed=s), _surface(space, seed=s), budget) for s in seeds]
    assert np.mean(ours) < 0.7 * np.mean(rand), (ours, rand)
    assert sum(n <= budget for n in ours) >= 3, ours


def test_batch_finder_doubles_to_the_largest_micro_batch_that_fits_then_grids():
    space = _space(patches=())
    surface = _surface(space, base_peak=0.5)  # micro-batch 16 is +0.75 in log peak: OOM
    sampler, history = BatchFinderSampler(space), []
    for _ in range(4):
        proposal = sampler.ask(history)
        history.append(surface.run(proposal.candidate))
    assert [t.candidate.knobs["micro_batch_size"] for t in history[:3]] == [4, 8, 16]
    assert [t.status for t in history[:3]] == [TrialStatus.OK, TrialStatus.OK, TrialStatus.OOM]
    assert history[3].candidate.knobs["micro_batch_size"] == 8
    assert proposal.reason.startswith("grid")


def test_greedy_moves_to_a_faster_neighbour_and_explores_around_it():
    space = _space(patches=())
    base = space.baseline()
    faster = space.with_value(base, "optimizer_impl", "fused")
    history = [result(base, step=1.0), result(faster, step=0.9)]
    proposal = GreedySampler(space).ask(history)
    assert proposal.candidate in space.neighbours(faster)


def test_top_candidates_rank_by_model_not_by_one_lucky_run():
    space = _space()
    surface = _surface(space, seed=5, base_peak=0.2)
    rng = np.random.default_rng(5)
    history = [surface.run(c) for c in [space.baseline()] + space.sample(rng, 40)]
    best = min((t for t in history if t.ok), key=lambda t: surface.job_s(t.candidate))
    runner_up = sorted((t for t in history if t.ok), key=lambda t: surface.job_s(t.candidate))[1]
    # A lucky run: the runner-up measured 3% faster than the true best's run.
    lucky = result(runner_up.candidate, step=best.step_time * 0.97, startup=runner_up.startup_s)
    history = [t for t in history if t is not runner_up] + [lucky]
    assert lucky.step_time < best.step_time
    top = InfraRSISampler(space).top_candidates(history + [result(space.baseline(), TrialStatus.CRASH)], 3)
    assert top[0].candidate.key() == best.candidate.key()
    assert all(t.candidate.key() != space.baseline().key() for t in top)  # crashed once: excluded
    assert top[0].predicted_job_s <= top[1].predicted_job_s <= top[2].predicted_job_s


def _rough_priors(space: SearchSpace) -> PriorTable:
    """What a built-in table knows: micro-batch and checkpointing move memory, the rest barely;
    larger micro-batches are faster, checkpointing slower."""
    mem = {"micro_batch_size=1": -0.3, "micro_batch_size=2": -0.2, "micro_batch_size=8": 0.3,
           "micro_batch_size=16": 0.6, "activation_checkpointing=True": -0.2}
    time = {"micro_batch_size=1": 0.4, "micro_batch_size=2": 0.2, "micro_batch_size=8": -0.2,
            "micro_batch_size=16": -0.4, "activation_checkpointing=True": 0.2}
    return PriorTable.of([Prior(key=k, time_log_mean=time.get(k, 0.0), time_log_sd=0.3 if k in time else 0.1,
                                mem_log_mean=mem.get(k, 0.0), mem_log_sd=0.3 if k in mem else 0.1, source="test")
                          for k in space.setting_keys])


def test_after_the_fastest_micro_batch_ooms_the_sampler_tries_it_again_only_with_a_memory_saver():
    space = _space()
    surface = _surface(space, seed=0)  # micro-batch 16 is the fastest setting and never fits alone
    sampler, history = InfraRSISampler(space, _rough_priors(space)), []
    while len(history) < 16 and (proposal := sampler.ask(history)) is not None:
        history.append(surface.run(proposal.candidate))
    first_oom = next(i for i, t in enumerate(history)
                     if t.status is TrialStatus.OOM and t.candidate.knobs["micro_batch_size"] == 16)
    again = [t for t in history[first_oom + 1:] if t.candidate.knobs["micro_batch_size"] == 16]
    assert all(t.ok and t.candidate.knobs["activation_checkpointing"] for t in again), \
        [(t.status.value, space.settings(t.candidate)) for t in history]
    # Checkpointing costs more here than micro-batch 16 gains (+0.17 against -0.10), so the pair
    # need not run at all: the optimum is micro-batch 8's.
    assert min(surface.job_s(t.candidate) for t in history if t.ok) == surface.job_s(surface.optimum())


def test_the_priors_alone_go_best_first_then_its_neighbours_and_keep_below_an_oom():
    space = _space(patches=())
    base = space.baseline()
    priors = PriorTable.of([
        Prior(key="micro_batch_size=16", time_log_mean=-0.3, time_log_sd=0.1, mem_log_mean=0.7, mem_log_sd=0.1,
              source="test"),
        Prior(key="micro_batch_size=8", time_log_mean=-0.2, time_log_sd=0.1, mem_log_mean=0.35, mem_log_sd=0.1,
              source="test"),
        Prior(key="optimizer_impl=fused", time_log_mean=-0.1, time_log_sd=0.1, mem_log_mean=0.0, mem_log_sd=0.1,
              source="test"),
    ])
    sampler = PriorsOnlySampler(space, priors)
    assert sampler.ask([]).candidate == base
    history = [result(base, step=1.0, peak=int(0.45 * space.budget_bytes))]
    first = sampler.ask(history).candidate
    assert first.knobs["micro_batch_size"] == 16 and first.knobs["optimizer_impl"] == "fused"
    history.append(result(first, TrialStatus.OOM))
    # Past the OOM, nothing the memory priors put as high as micro-batch 16 comes first.
    for _ in range(5):
        cand = sampler.ask(history).candidate
        assert cand.knobs["micro_batch_size"] != 16
        history.append(result(cand, peak=int(0.7 * space.budget_bytes)))


def test_a_setting_its_prior_calls_too_hungry_everywhere_is_tried_once_before_converging(monkeypatch):
    """The MoE cluster held out: recomputation off was priced by its prior alone, given 0.3-0.4 of
    fitting everywhere, and no trial held it; here compile's prior says +2.0 in log memory, truly +0.05."""
    space = _space(patches=())
    time = {**DENSE_TIME, "compile=True": -0.4}
    surface = Surface(space, time, {**DENSE_MEM, "compile=True": 0.05}, base_peak=0.5 * space.budget_bytes)
    priors = PriorTable.of([Prior(key="compile=True", time_log_mean=-0.3, time_log_sd=0.2, mem_log_mean=2.0,
                                  mem_log_sd=0.5, source="test")])
    optimum = surface.optimum()
    assert optimum.knobs["compile"]

    def search() -> tuple[InfraRSISampler, list]:
        sampler, history = InfraRSISampler(space, priors), []
        while len(history) < 30 and (proposal := sampler.ask(history)) is not None:
            history.append(surface.run(proposal.candidate))
            history[-1].detail = proposal.reason
        return sampler, history

    # The premise: expected improvement among likely fits never holds compile, and the search stops.
    monkeypatch.setattr(InfraRSISampler, "_probe", lambda self, *args: None)
    plain, history = search()
    assert plain.stop_reason.startswith("converged"), plain.stop_reason
    assert not any(t.candidate.knobs["compile"] for t in history)
    monkeypatch.undo()
    probing, history = search()
    compiled = [t for t in history if t.candidate.knobs["compile"]]
    assert compiled and "compile=True, untried, has a" in compiled[0].detail, \
        [(space.settings(t.candidate), t.detail) for t in history]
    # The one trial priced it: the search goes on to the optimum, which holds it.
    assert optimum.key() in {t.candidate.key() for t in history}
