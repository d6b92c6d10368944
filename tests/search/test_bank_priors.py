"""A run's own measurements outrank a bank's (issue 24), on the models alone (no processes).

The job of the issue: threads 1 or 2, the optimizer loop, the SDPA patch; the bank believed SDPA
makes a step 1.15x slower (±2%); this run measured it 0.77x in its validation and one search
trial, against a 1,222 ms baseline that ran once (doctor ran it twice more, measuring a 3% CV).
"""

from __future__ import annotations

import math

from infrarsi.contract import Knob
from infrarsi.priors.types import Prior, PriorTable
from infrarsi.search.calibration import prior_checks
from infrarsi.search.infrarsi_sampler import InfraRSISampler
from infrarsi.search.space import SearchSpace
from infrarsi.search.strategy import Strategy
from infrarsi.search.synthetic import contract_with, result
from infrarsi.trials import Candidate

KNOBS = [
    Knob(name="threads", role="threads", type="int", default=1, flag="--threads", domain=[1, 2], tunable=True),
    Knob(name="optimizer_impl", role="optimizer_impl", type="str", default="for-loop", flag="--optimizer_impl",
         domain=["for-loop", "foreach"], tunable=True),
]
CONTRACT = contract_with(KNOBS)
SPACE = SearchSpace.from_contract(CONTRACT, ["sdpa_attention"])
BASE = Candidate({"threads": 1, "optimizer_impl": "for-loop"})
SDPA = Candidate(BASE.knobs, ("sdpa_attention",))
SDPA_FOREACH = Candidate({"threads": 1, "optimizer_impl": "foreach"}, ("sdpa_attention",))
DOCTOR_CV = 0.03


def bank_prior(key: str, factor: float, sd: float = 0.01) -> Prior:
    return Prior(key=key, time_log_mean=math.log(factor), time_log_sd=sd, mem_log_mean=0.0, mem_log_sd=1.0,
                 source="bank: 3 trials in 1 run on this hardware")


BANK = PriorTable.of([bank_prior("patch:sdpa_attention", 1.15), bank_prior("threads=2", 11.93)])
ISSUE_HISTORY = [result(BASE, step=1.222), result(SDPA, step=0.872), result(SDPA_FOREACH, step=0.843)]


def test_a_tight_prior_met_by_two_trials_far_outside_it_is_flagged():
    checks = {c.key: c for c in prior_checks(SPACE, BANK, ISSUE_HISTORY, noise_cv=DOCTOR_CV) if c.quantity == "time"}
    sdpa = checks["patch:sdpa_attention"]
    assert sdpa.n_trials == 2 and sdpa.observed < math.log(0.8)
    # Each trial is good to doctor's CV, not to the ridge's ±0.2% through three points.
    assert sdpa.observed_sd >= DOCTOR_CV * math.sqrt(1 / 2 + 1 / 1) - 1e-12
    assert sdpa.miscalibrated
    assert not checks["threads=2"].miscalibrated  # never tried: nothing to say


def test_a_flagged_prior_stops_steering_at_the_next_fit():
    sampler = InfraRSISampler(SPACE, BANK, noise_cv=DOCTOR_CV, noise_floor=DOCTOR_CV)
    sampler.time.fit(ISSUE_HISTORY)
    i = SPACE.setting_keys.index("patch:sdpa_attention")
    assert "patch:sdpa_attention" in sampler.time.miscalibrated
    assert sampler.time.priors_in_use.mean[i] == 0.0 and sampler.time.priors_in_use.sd[i] >= 1.0
    # The model now expects the patched job faster than the baseline, as it was measured.
    job = sampler.time.predict([BASE, SDPA]).log_job
    assert job[1] < job[0]


# A noisy machine (doctor's CV 10%: its floor is 1.28x) and a bank prior the checks cannot overrule
# on one trial (SDPA 1.3x slower, sd 0.1: the trial's 0.71x is 3.5 sd away, under SINGLE_TRIAL_Z):
# with one trial worth as little as that noise, the model keeps ranking the patch behind the baseline.
NOISY_CV = 0.10
NOISY_FLOOR = 1 + 1.96 * math.sqrt(2) * NOISY_CV
SMALL = SearchSpace.from_contract(contract_with(KNOBS[:1]), ["sdpa_attention"])
SMALL_BASE, SMALL_SDPA = Candidate({"threads": 1}), Candidate({"threads": 1}, ("sdpa_attention",))
STUBBORN = PriorTable.of([bank_prior("patch:sdpa_attention", 1.3, sd=0.1), bank_prior("threads=2", 3.0, sd=0.05)])


def test_the_search_is_not_converged_while_the_model_disputes_a_measured_speedup():
    history = [result(SMALL_BASE, step=s) for s in (1.222, 1.21, 1.23, 1.215)] + [result(SMALL_SDPA, step=0.872)]
    plain = InfraRSISampler(SMALL, STUBBORN, n_initial=1, noise_cv=NOISY_CV, noise_floor=NOISY_CV)
    assert plain.ask(history) is None and plain.stop_reason.startswith("converged"), "the premise: no guard, it stops"
    guarded = InfraRSISampler(SMALL, STUBBORN, n_initial=1, noise_cv=NOISY_CV, noise_floor=NOISY_CV,
                              min_speedup=NOISY_FLOOR)
    proposal = guarded.ask(history)
    assert guarded.disputed(history) == [SMALL_SDPA]
    assert proposal is not None and "not converged" in proposal.reason, guarded.stop_reason


def test_a_candidate_measured_fast_is_verified_whatever_the_model_ranks():
    strategy = Strategy(name="infrarsi", contract=contract_with(KNOBS[:1]), priors=STUBBORN, priors_source="bank",
                        noise_cv=NOISY_CV, min_speedup=NOISY_FLOOR)
    strategy = strategy.prepare(SMALL)
    history = [result(SMALL_BASE, step=1.222), result(SMALL_SDPA, step=0.872)]
    assert strategy.top_candidates(history, 5)[0] == SMALL_BASE, "the premise: the model puts the baseline first"
    assert strategy.to_verify(history, 2) == [SMALL_SDPA]
    # Within doctor's floor, and ranked behind the baseline: nothing to verify.
    assert strategy.to_verify([result(SMALL_BASE, step=1.222), result(SMALL_SDPA, step=1.0)], 2) == []


def test_a_candidate_measured_slow_is_not_verified_whatever_the_model_ranks():
    """A bank sure the patch is 1.25x faster (±10%) and one trial 1.31x slower: the model still ranks
    it first, but verification does not rerun what the run measured slower beyond doctor's floor."""
    eager = PriorTable.of([bank_prior("patch:sdpa_attention", 0.8, sd=0.1), bank_prior("threads=2", 3.0, sd=0.05)])
    strategy = Strategy(name="infrarsi", contract=contract_with(KNOBS[:1]), priors=eager, priors_source="bank",
                        noise_cv=NOISY_CV, min_speedup=NOISY_FLOOR)
    strategy = strategy.prepare(SMALL)
    history = [result(SMALL_BASE, step=1.222), result(SMALL_SDPA, step=1.6)]  # 1.31x slower, beyond the 1.28x floor
    assert strategy.top_candidates(history, 5)[0] == SMALL_SDPA, "the premise: the model puts the patch first"
    assert strategy.to_verify(history, 2) == []
    # Within doctor's floor the measurement cannot overrule the ranking: it is verified.
    assert strategy.to_verify([result(SMALL_BASE, step=1.222), result(SMALL_SDPA, step=1.3)], 2) == [SMALL_SDPA]
