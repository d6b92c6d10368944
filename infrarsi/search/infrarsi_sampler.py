"""InfraRSI's sampler: diverse seeds first, then EI x P(fits) x P(runs) over every valid candidate.

``ask(history)`` is stateless in what it proposes (the same history gives the same proposal), so
several workers sharing one study can each ask; the only state kept between calls is the models'
last parameters, which make the next fit start close to its optimum.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from infrarsi.priors.types import PriorTable
from infrarsi.search.acquisition import MIN_GAIN, Scores, memory_saver_pair, p_gain, score
from infrarsi.search.crash_model import p_runs, p_runs_each
from infrarsi.search.effects import setting_priors
from infrarsi.search.gp import DEFAULT_NOISE_FLOOR
from infrarsi.search.history import distinct, failed_keys, measured_fast, measured_job_s, measured_keys
from infrarsi.search.interactions import PairKernel
from infrarsi.search.memory_guard import nearest_distance, oom_dominated, oom_savers
from infrarsi.search.memory_model import MemoryModel
from infrarsi.search.part_interactions import PartInteractions
from infrarsi.search.sampler import Proposal, Sampler
from infrarsi.search.space import CandidateSet, SearchSpace
from infrarsi.search.time_model import TimeModel
from infrarsi.trials import Candidate, TrialResult, TrialStatus

_HARD_FAILURES = (TrialStatus.CRASH, TrialStatus.NUMERICS, TrialStatus.CONTRACT)
_SLOW = (TrialStatus.ABORTED_SLOW, TrialStatus.TIMEOUT)
"""A run stopped for being slow: measured slower than the baseline, whatever its median."""
SEED_P_FITS = 0.8
"""A seed is there to teach the time model: it should fit in memory with confidence, not on a coin flip."""
MIN_P_RUNS = 0.5
"""A trial is expected to run: one the crash model gives even odds of breaking teaches as little as an OOM."""
PAIR_P_FITS = 0.8
"""Pairing memory savers with a setting predicted not to fit asks this confidence that the pair
fits: at 0.5 half of the simulated clusters' pairings ran out of memory."""
EI_P_FITS = (0.5, 0.7)
"""Expected improvement chooses among candidates at least this likely to fit, while any is: an
OOM teaches the memory model one bound and the time model nothing. Even odds until a trial has run
out of memory, so an optimum at the memory's edge stays within reach; surer after it (but see
SAVER_P_FITS). On the simulated clusters, where candidates given 0.7-0.8 fit 90-100 % of the time,
0.7 reaches the 70B's optima at 83-93 % of the memory, which 0.8 passed over in half the runs, for
0.2 more OOM trials per run (docs/benchmarks.md, "The layout's state together")."""
SAVER_P_FITS = 0.6
"""After an OOM, a candidate that differs from an OOMed trial only by memory savers may be chosen at
this confidence, below EI_P_FITS's: the pairing is how a hungry fast setting runs. 50 runs of
20 trials on each simulated cluster (docs/benchmarks.md, "Levels measured against one reference"):
at 0.5, 0.7 / 1.3 / 1.1 / 0.8 OOM trials per run (at most 2-3); at 0.6, 0.6 / 1.2 / 1.0 / 0.7 (at
most 1-2) with as many or more runs reaching 95 % of the optimum; at 0.7, the 7B's runs reaching it
fall from 88 % to 48 %. A saver must be one by the priors' prices too (``oom_savers``'s ``believed``)."""
RANK_P_FITS = 0.8
"""A measured candidate the memory model gives less than this of fitting is ranked for
re-verification after those it is surer of (``top_candidates``)."""
TRUST_DISTANCE = 2
"""Expected improvement and the memory pairing choose within this many dimensions of a trial that
ran in memory, while any candidate there is left: each of the memory model's parts is additive,
and further out its misfit (an interaction of three settings) is what decides whether a candidate
fits."""
SEED_DISTANCE = 3
"""Settings a prior-guided seed differs in from every earlier trial, where the space allows."""
CONVERGED_CHANCE = 0.05
"""The search may stop once no untried candidate has this chance (P(gain > MIN_GAIN) x P(fits) x
P(runs), on the time model's posterior, interactions included) of beating the best measured one.
It once stopped on expected improvement below 0.1% of job time (issue 53): an expectation that
small is what a model sure of a wrong belief gives, and after two slow trials of bf16, both with
SDPA, the additive model was sure bf16 was slow everywhere."""
LARGE_EFFECT = math.log(1.25)
"""A setting measured this much slower (its data-only log effect) than the baseline, against its
prior, is not written off before it has been tried in another context: see ``_one_context``."""
CONVERGE_AFTER_OK = 5
"""Completed trials (the baseline's included) before the search may stop: the model's uncertainty
is only as good as the runs behind it. With two, one oversubscribed 2-process x 2-thread trial
made every 2-process launch look hopeless and the search stopped before trying 2 x 1."""


@dataclass(frozen=True, slots=True)
class RankedCandidate:
    candidate: Candidate
    predicted_step_s: float
    predicted_job_s: float
    log_sd: float
    """Predictive sd of the log step time."""
    measured_step_s: float
    """Median over its ok runs of their median step time."""
    runs: int


def describe(space: SearchSpace, candidate: Candidate) -> str:
    return ", ".join(space.settings(candidate)) or "baseline"


class InfraRSISampler(Sampler):
    def __init__(
        self,
        space: SearchSpace,
        priors: PriorTable | None = None,
        seeds: list[Candidate] | tuple[Candidate, ...] = (),
        *,
        unbanked: PriorTable | None = None,
        n_initial: int = 4,
        enumerate_limit: int = 20_000,
        n_random: int = 4_000,
        noise_floor: float = DEFAULT_NOISE_FLOOR,
        noise_cv: float | None = None,
        min_speedup: float = math.inf,
        interactions: PartInteractions | None = None,
        pairs: bool = True,
        seed: int = 0,
    ):
        """``noise_floor``: doctor's run-to-run sd of log step time, when known; ``noise_cv`` the
        CV it measured (None: not measured), which the prior checks hold each trial to;
        ``min_speedup`` its noise floor, beyond which a measured speed-up must be explained by the
        model before the search may call itself converged (infinite: no such guard); ``seeds``
        the experience bank's, and ``unbanked`` the priors without the bank's findings, which the
        models fall back to once the trials contradict the bank (``bank_contradicted``);
        ``interactions`` the layout's known effects on the memory's parts; ``pairs`` whether the
        time model has its pairwise interaction terms (False: additive, for comparison)."""
        self.space = space
        self.priors = priors or PriorTable()
        self.seeds = list(seeds)
        self.n_initial = n_initial
        self.n_random = n_random
        self.seed = seed
        self.enumerate = space.size() <= enumerate_limit
        self.min_speedup = min_speedup
        self._models = [(TimeModel(space, p, noise_floor=noise_floor, noise_cv=noise_cv, interactions=pairs),
                         MemoryModel(space, p, interactions=interactions))
                        for p in (self.priors, unbanked if unbanked is not None else self.priors)]
        self.time, self.memory = self._models[0]
        self._bank_keys = set() if unbanked is None else {
            k for k in space.setting_keys if self.priors.get(k) != unbanked.get(k)}
        """Settings whose priors the bank moved."""
        self._prior_time = setting_priors(space, self.priors, "time").mean
        self._pairs = PairKernel.of(space)
        """The pair priors, for which dimension a setting most likely interacts with (``_one_context``)."""
        self.stop_reason = ""
        """Why the last ``ask`` proposed nothing."""

    # --- the pool of candidates considered --------------------------------------------------

    def _pool(self, history: list[TrialResult]) -> CandidateSet:
        if self.enumerate:
            return self.space.enumerated()
        rng = np.random.default_rng([self.seed, len(history)])
        cands = self.space.sample(rng, self.n_random)
        # Around the best measured candidates the model's ranking matters most: include every
        # one-change neighbour of the few best.
        oks = sorted((t for t in history if t.ok), key=lambda t: measured_job_s(t, self.space.planned_steps))
        for t in oks[:3]:
            cands += self.space.neighbours(t.candidate)
        return self.space.candidate_set(distinct(cands))

    # --- asking ----------------------------------------------------------------------------

    def ask(self, history: list[TrialResult]) -> Proposal | None:
        """The next candidate to run; None (``stop_reason`` says why) once every valid candidate
        has been measured, or none left has ``CONVERGED_CHANCE`` of beating the best by
        ``MIN_GAIN``, no surprising slow setting waits for another context (``_one_context``) and
        the model accounts for every measured speed-up (``disputed``)."""
        # The matrices are small: a multi-threaded BLAS only spins against the trials' own threads.
        with threadpool_limits(limits=1, user_api="blas"):
            contradicted = self.bank_contradicted(history)
            self.time, self.memory = self._models[contradicted]
            measured = measured_keys(history)
            pool = self._pool(history)
            fresh = np.array([k not in measured for k in pool.keys], dtype=bool)
            if not fresh.any():
                self.stop_reason = "every candidate measured"
                return None
            n_ok = sum(1 for t in history if t.ok and t.step_time)
            # A contradicted bank's seeds take no spread-out seed's place: on the simulated 7B a
            # wrong bank's seed had cost the third seed, and with it the run's first trial without
            # recomputation. A bank seed that ran faster than the baseline takes all their places:
            # the bank's findings have done what the spread-out seeds are for, and its other seeds
            # compete by expected improvement.
            banked = {c.key() for c in self.seeds}
            seeded = measured - (banked if contradicted else set())
            confirmed = not contradicted and any(t.ok and t.candidate.key() in banked for t in history)
            if (len(seeded) < self.n_initial and not confirmed) or n_ok < 2:
                proposal = self._seed(history, measured, pool, fresh, must=n_ok < 2)
                if proposal is not None:
                    return proposal
            return self._acquire(history, pool, fresh, may_stop=n_ok >= CONVERGE_AFTER_OK)

    def _bank_seed_results(self, history: list[TrialResult]) -> tuple[bool, bool]:
        """Whether a bank seed has failed (not ok), and whether one ran no faster than the
        baseline beyond doctor's noise floor (a seed is the bank's promise of a speed-up; an abort
        for slowness included)."""
        keys = {c.key() for c in self.seeds}
        base = [measured_job_s(t, self.space.planned_steps) for t in history
                if t.ok and t.candidate.key() == self.space.baseline().key()]
        tried = [t for t in history if t.candidate.key() in keys]
        floor = self.min_speedup if math.isfinite(self.min_speedup) else 1.0
        slow = any(t.status in _SLOW for t in tried) or bool(base) and any(
            t.ok and measured_job_s(t, self.space.planned_steps) * floor > min(base) for t in tried)
        return any(not t.ok for t in tried), slow

    def bank_contradicted(self, history: list[TrialResult]) -> bool:
        """The live trials contradict the bank: a bank seed ran no faster than the baseline (or
        was stopped for slowness), or a time prior the bank moved fails its prior check. The bank's findings
        are then read as wrong here, all of them, and the models stop using them: a wrong bank's
        priors would go on steering expected improvement after its seeds stopped, away from the
        settings it called slow, which no trial then checks."""
        if not self._bank_keys:
            return False
        if self._bank_seed_results(history)[1]:
            return True
        banked = self._models[0][0]
        return banked.fit(history).fitted and bool(banked.miscalibrated & self._bank_keys)

    def _seed(self, history: list[TrialResult], measured: set[str], pool: CandidateSet, fresh: np.ndarray, *,
              must: bool) -> Proposal | None:
        """The next seed; None when no spread-out candidate is worth its trial and the models
        have enough (``must`` false) to choose by expected improvement instead."""
        # The bank's seeds come first, until one fails or runs no faster than the baseline: the
        # rest were chosen by the same bank.
        if not any(self._bank_seed_results(history)):
            for cand in self.seeds:
                if self.space.is_valid(cand) and cand.key() not in measured:
                    return Proposal(cand, "seed from the experience bank")
        base = self.space.baseline()
        if base.key() not in measured:
            return Proposal(base, "baseline")
        # Among the fresh candidates that fit with confidence and lie at least SEED_DISTANCE
        # settings from every trial so far (so the first trials spread out), the best predicted
        # job time: the time model's mean starts at the prior and already knows what the first
        # trials showed (a 10x-slower bf16, say). Ties are broken at random. Where none is that
        # sure to fit (no memory priors yet), a likely fit will do for the seeds that must run.
        # A seed must also be expected no slower than the best run so far: one the priors already
        # call slower is aborted and teaches less than the trial expected improvement would pick
        # (on the measured MoE table the spread-out seed, checkpointing + micro-batch 2, was
        # aborted in every replay).
        rng = np.random.default_rng([self.seed, len(history)])
        self.time.fit(history)
        expected = (self.time.predict_indicator(pool.indicator).log_job if self.time.fitted
                    else pool.indicator @ self._prior_time) + rng.uniform(0, 1e-6, len(pool.keys))
        memory = self.memory.fit(history)
        p_fits = memory.p_fits(pool.features, self.space.budget_bytes, pool.indicator)
        fresh = fresh & self._worth_a_trial(history, memory, pool)
        sure, likely = fresh & (p_fits >= SEED_P_FITS), fresh & (p_fits >= 0.5)
        done = self.space.indicator(distinct([t.candidate for t in history]))
        far = (pool.indicator[:, None, :] != done[None, :, :]).sum(axis=2).min(axis=1) >= SEED_DISTANCE
        promising = expected <= self._best_expected(self._clean(history)[1])
        # Until a second trial runs, a seed that fits matters more than one that spreads: on the
        # simulated 175B cluster (19% of its points fit) four in five spread-out likely fits ran
        # out of memory, each one more trial with nothing for the time model. After that a seed
        # is optional, so only a sure fit is worth one: on the MoE fixture a likely one (bf16, its
        # CPU memory prior as wide as its mean) ran out of memory in every run.
        choices = ([sure & far & promising, sure & far, sure, likely & far & promising, likely & far, likely, fresh]
                   if must else [sure & far & promising])
        rows = next((np.flatnonzero(m) for m in choices if m.any()), None)
        if rows is None:
            return None
        pick = int(rows[np.argmin(expected[rows])])
        return Proposal(pool.candidates[pick], "prior-guided diverse seed",
                        {"log_expected": float(expected[pick]), "p_fits": float(p_fits[pick])})

    def _worth_a_trial(self, history: list[TrialResult], memory: MemoryModel, pool: CandidateSet) -> np.ndarray:
        """Candidates neither as memory-hungry as an OOMed trial nor below even odds of running,
        each setting's failures counted wherever it is held (failures are deterministic: on a Hugging
        Face trainer the spread-out seeds set bf16 four times after it had crashed; with the
        shared-core rule alone a crashing compile came back 3-4 times in a synthetic run, with this
        once). Seeds and expected improvement both choose among them; ``p_runs`` then weighs EI."""
        runs = p_runs_each(self.space, history, pool.indicator)
        return ~self._oom_dominated(history, memory, pool) & (runs >= MIN_P_RUNS)

    def _oom_dominated(self, history: list[TrialResult], memory: MemoryModel, pool: CandidateSet) -> np.ndarray:
        """Candidates at least as hungry as an OOMed trial in every dimension (``oom_dominated``)."""
        oomed = _oomed(history)
        if not memory.fitted or not oomed:
            return np.zeros(len(pool.keys), dtype=bool)
        return oom_dominated(self.space, memory.setting_effects()[0], pool.indicator, self.space.indicator(oomed))

    def _near_fits(self, history: list[TrialResult], pool: CandidateSet) -> np.ndarray:
        """Candidates within ``TRUST_DISTANCE`` dimensions of a trial that ran in memory."""
        fits = distinct([t.candidate for t in history if t.ok])
        if not fits:
            return np.ones(len(pool.keys), dtype=bool)
        return nearest_distance(self.space, pool.indicator, self.space.indicator(fits)) <= TRUST_DISTANCE

    @staticmethod
    def _clean(history: list[TrialResult]) -> tuple[set[str], list[Candidate]]:
        """Keys and candidates of the trials that ran clean (no deterministic failure since)."""
        ok_keys = {t.candidate.key() for t in history if t.ok} - failed_keys(history)
        return ok_keys, distinct([t.candidate for t in history if t.candidate.key() in ok_keys])

    def _best_expected(self, oks: list[Candidate]) -> float:
        """The lowest expected log job time among ``oks``, the candidates run clean so far: the
        models' view of the best, not a single lucky run (on the prior's scale before the time
        model is fitted); infinite with none."""
        if not oks:
            return math.inf
        expected = self.time.predict(oks).log_job if self.time.fitted else self.space.indicator(oks) @ self._prior_time
        return float(np.min(expected))

    def _acquire(self, history: list[TrialResult], pool: CandidateSet, fresh: np.ndarray, *,
                 may_stop: bool) -> Proposal | None:
        space = self.space
        self.time.fit(history)
        memory = self.memory.fit(history)
        pred = self.time.predict_indicator(pool.indicator)
        p_fits = memory.p_fits(pool.features, space.budget_bytes, pool.indicator)
        fresh = fresh & self._worth_a_trial(history, memory, pool)
        if not fresh.any():
            self.stop_reason = ("every candidate left is at least as memory-hungry as one that ran out of memory "
                                "or holds a setting that broke the job")
            return None
        untried = fresh
        near = fresh & self._near_fits(history, pool)
        if near.any():
            fresh = near
        hard = failed_keys(history, _HARD_FAILURES)
        ok_keys, oks = self._clean(history)
        # Improvement is measured against the best measured candidate; with none left usable,
        # against the best prediction anywhere.
        best = self._best_expected(oks) if oks else float(np.min(pred.log_job))
        scores = score(pred, p_fits, best, p_runs(space, history, pool.indicator))

        eligible = np.array([k not in hard for k in pool.keys], dtype=bool)
        anchor = int(np.flatnonzero(eligible)[np.argmin(pred.log_job[eligible])])
        anchor_key = pool.keys[anchor]
        oomed = failed_keys(history, (TrialStatus.OOM,))
        likely = fresh & (p_fits >= EI_P_FITS[bool(oomed)])
        if oomed:
            fitted, prior = memory.setting_effects()[0], memory.setting_prior
            savers = oom_savers(space, fitted, pool.indicator, space.indicator(_oomed(history)),
                                np.where(prior.known, prior.mean, fitted))
            likely |= fresh & savers & (p_fits >= SAVER_P_FITS)
        choice = likely if likely.any() else fresh
        pick = int(np.argmax(np.where(choice, scores.value, -np.inf)))
        # The memory savers' pair of the fastest predicted candidate, where it scores at least what
        # expected improvement picks: once the memory model priced the activations from the shape,
        # the pairs it preferred were detours (the simulated 7B with a 70B's bank: five in a row at
        # 85-90 % of the optimum while its neighbour without recomputation waited).
        if memory.fitted and anchor_key not in ok_keys and (anchor_key in oomed or p_fits[anchor] < 0.5):
            pair = memory_saver_pair(space, memory, pool.indicator, scores, anchor, fresh, PAIR_P_FITS)
            if pair is not None and pred.log_job[pair] < best and scores.value[pair] >= scores.value[pick]:
                reason = f"memory savers for the fastest predicted ({describe(space, pool.candidates[anchor])})"
                return Proposal(pool.candidates[pair], reason, self._predicted(scores, memory, pool, pair))
        reason = "expected improvement x P(fits) x P(runs)"
        if may_stop:
            gain = p_gain(pred, best) * scores.p_fits * scores.p_runs
            chance = np.where(choice, gain, 0.0)
            top = int(np.argmax(chance))
            if chance[top] < CONVERGED_CHANCE:
                probe = self._probe(history, pool, untried, gain)
                if probe is not None:
                    row, keys = probe
                    return Proposal(pool.candidates[row], f"{reason} (not converged: {keys}, untried, has a "
                                    f"{gain[row]:.1%} chance of a gain at P(fits) {scores.p_fits[row]:.2f})",
                                    self._predicted(scores, memory, pool, row))
                context = self._one_context(history, pool, untried & (p_fits >= 0.5), pred.log_job)
                if context is not None:
                    row, why = context
                    return Proposal(pool.candidates[row], f"{reason} (not converged: {why})",
                                    self._predicted(scores, memory, pool, row))
                disputed = self.disputed(history)
                if not disputed:
                    self.stop_reason = (f"converged: the most promising untried candidate "
                                        f"({describe(space, pool.candidates[top])}) has a {chance[top]:.1%} chance "
                                        f"of gaining {math.expm1(MIN_GAIN):.0%} of job time, below "
                                        f"{CONVERGED_CHANCE:.0%}")
                    return None
                # The model says nothing is left to gain, yet it cannot account for a measured
                # speed-up: it is wrong somewhere, so it has not converged.
                reason += f" (not converged: the model does not rank {describe(space, disputed[0])}, measured " \
                          f"faster, ahead of the baseline)"
        return Proposal(pool.candidates[pick], reason, self._predicted(scores, memory, pool, pick))

    def _probe(self, history: list[TrialResult], pool: CandidateSet, allowed: np.ndarray,
               chance: np.ndarray) -> tuple[int, str] | None:
        """The ``allowed`` candidate of highest ``chance`` that holds a setting no trial has held,
        and those settings, where that chance reaches ``CONVERGED_CHANCE``; None otherwise.
        Expected improvement chooses among likely fits, and a setting priced by its prior alone
        may be likely nowhere: on the MoE cluster held out, every trial kept full recomputation
        while the optimum, without it, was given 0.3-0.4 of fitting, and the search called itself
        converged. One trial at the setting's best chance prices it: a peak, or an OOM's bound."""
        unheld = self.space.indicator(distinct([t.candidate for t in history])).sum(axis=0) == 0
        novel = allowed & (pool.indicator[:, unheld] > 0).any(axis=1)
        if not novel.any():
            return None
        row = int(np.argmax(np.where(novel, chance, -np.inf)))
        if chance[row] < CONVERGED_CHANCE:
            return None
        keys = [k for k, on in zip(self.space.setting_keys, (pool.indicator[row] > 0) & unheld, strict=True) if on]
        return row, ", ".join(keys)

    def _one_context(self, history: list[TrialResult], pool: CandidateSet, allowed: np.ndarray,
                     log_job: np.ndarray) -> tuple[int, str] | None:
        """A candidate that tries a surprising slow setting in a context it has not been tried in,
        and why; None when there is none. A setting is surprising when its trials measured it
        ``LARGE_EFFECT`` slower and its prior check failed (bf16, believed faster, measured slower);
        its context is the value its likeliest partner held in the trials that held it (whatever
        their status: an OOM looked too), the dimension whose pair with it has the largest prior sd
        (``PairKernel``: bf16's is the attention patch). Where every such trial held the same value
        (bf16 always with SDPA), the slowness may be the pair's, and the model's pair term may be
        too narrow to say so (its scale shrinks on a surface that is otherwise additive), so the
        search is not converged until it has tried the setting with the partner moved: of the
        ``allowed`` candidates that do, the one of lowest predicted ``log_job``."""
        data = self.time.data
        if data is None or not len(data.y):
            return None
        space = self.space
        dims = np.array([space.knob_of(k) for k in space.setting_keys])
        held = space.indicator(distinct([t.candidate for t in history])) > 0
        for s in np.argsort(-self.time.data_effects):
            key = space.setting_keys[s]
            if self.time.data_effects[s] < LARGE_EFFECT:
                break
            others = [d for d in dict.fromkeys(dims) if d != dims[s]]
            if key not in self.time.miscalibrated or not others:
                continue
            partner = max(others, key=lambda d: self._pairs.sd(dims[s], d))
            cols = np.flatnonzero(dims == partner)
            # The value each trial with the setting gave the partner: its column, or -1 (the default).
            values = {int(cols[np.argmax(r)]) if r.any() else -1 for r in held[held[:, s]][:, cols]}
            if len(values) != 1:
                continue
            (only,) = values
            moved = pool.indicator[:, only] == 0 if only >= 0 else pool.indicator[:, cols].any(axis=1)
            options = allowed & (pool.indicator[:, s] > 0) & moved
            if options.any():
                rows = np.flatnonzero(options)
                context = space.setting_keys[only] if only >= 0 else f"{partner} at its default"
                return int(rows[np.argmin(log_job[rows])]), (
                    f"{key} measured {math.exp(self.time.data_effects[s]):.2f}x slower, only with {context}")
        return None

    def disputed(self, history: list[TrialResult]) -> list[Candidate]:
        """Candidates measured faster than the baseline beyond ``min_speedup`` that the time model
        (fitted to ``history``) does not expect to be faster than the baseline."""
        base = self.space.baseline()
        fast = measured_fast(history, base, self.space.planned_steps, self.min_speedup)
        if not fast or not self.time.fitted:
            return []
        log_job = self.time.predict([base, *fast]).log_job
        return [c for c, job in zip(fast, log_job[1:], strict=True) if job >= log_job[0]]

    def _predicted(self, scores: Scores, memory: MemoryModel, pool: CandidateSet, i: int) -> dict[str, float]:
        out = {
            "step_s": float(scores.time.step_s[i]),
            "step_log_sd": float(scores.time.log_step_sd[i]),
            "startup_s": float(scores.time.startup_s[i]),
            "job_s": float(scores.time.job_s[i]),
            "p_fits": float(scores.p_fits[i]),
            "p_runs": float(scores.p_runs[i]),
            "ei": float(scores.ei[i]),
        }
        if memory.fitted:
            mean, _ = memory.predict(pool.features[i : i + 1], pool.indicator[i : i + 1])
            out["peak_bytes"] = float(math.exp(mean[0]))
        return out

    # --- for verification --------------------------------------------------------------------

    def ranked(self, history: list[TrialResult], k: int, planned_steps: int) -> list[Candidate]:
        """By the model, not by measurement (see ``top_candidates``)."""
        return [r.candidate for r in self.top_candidates(history, k)]

    def top_candidates(self, history: list[TrialResult], k: int) -> list[RankedCandidate]:
        """The k measured-ok candidates the model ranks fastest (by predicted job time, which
        pools every trial), not the k luckiest single runs. Deterministic failures are excluded,
        and a candidate the memory model gives less than ``RANK_P_FITS`` of fitting comes after
        every one it is surer of: re-verification runs it again and again, and one that ran at
        the budget's edge once (the MoE table's micro-batch 16 with SDPA: 715 MB of 718, its other
        run out of memory) fails there, leaving nothing verified."""
        failed = failed_keys(history)
        steps: dict[str, list[float]] = {}
        first: dict[str, Candidate] = {}
        for t in history:
            step = t.step_time
            if t.ok and step and t.candidate.key() not in failed:
                steps.setdefault(t.candidate.key(), []).append(step)
                first.setdefault(t.candidate.key(), t.candidate)
        self.time, self.memory = self._models[self.bank_contradicted(history)]
        if not steps or not self.time.fit(history).fitted:
            return []
        cands = list(first.values())
        pred = self.time.predict(cands)
        edge = np.zeros(len(cands), dtype=bool)
        if self.memory.fit(history).fitted:
            chosen = self.space.candidate_set(cands)
            edge = self.memory.p_fits(chosen.features, self.space.budget_bytes, chosen.indicator) < RANK_P_FITS
        order = np.lexsort((pred.log_job, edge))[:k]
        return [
            RankedCandidate(
                cands[i], float(pred.step_s[i]), float(pred.job_s[i]), float(pred.log_step_sd[i]),
                statistics.median(steps[cands[i].key()]), len(steps[cands[i].key()]),
            )
            for i in order
        ]


def _oomed(history: list[TrialResult]) -> list[Candidate]:
    """The distinct candidates that ran out of memory."""
    return distinct([t.candidate for t in history if t.status is TrialStatus.OOM])
