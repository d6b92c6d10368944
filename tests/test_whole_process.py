"""Re-verification: interleaved order, and the judge that promotes only a speedup beyond the noise."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from infrarsi.noise import SpeedupInterval, SpreadPrior, futile
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.whole_process import (
    Lengths,
    Pair,
    Rounds,
    Verdict,
    ahead_of_baseline,
    best_promoted,
    interleave,
    job_seconds,
    judge,
    run_pairs,
    whole_process,
)

BASE = Candidate(knobs={"micro_batch_size": 2})
FAST = Candidate(knobs={"micro_batch_size": 16})
PLANNED = 100
LENGTHS = Lengths(short=1, long=6, planned=PLANNED)
LOSSES = [4.0, 3.8, 3.61, 3.43]
EXIT_S = 0.3
ROUNDS = Rounds(least=2, most=4)


def run(candidate: Candidate, step: float, steps: int, *, status=TrialStatus.OK, startup=1.0, losses=LOSSES,
        peak=50_000_000, recorded: float | None = None, waste_at_exit=0.0) -> TrialResult:
    """A run of ``steps`` steps of ``step`` seconds each as the whole process shows it; its step
    records say ``recorded`` seconds a step (by default the same)."""
    stopped = (startup or 0.0) + steps * step
    return TrialResult(status=status, candidate=candidate, step_times=[recorded or step] * 5, losses=list(losses),
                       tokens_per_step=128, peak_bytes=peak, startup_s=startup, wall_s=2.0,
                       stopped_s=stopped, process_s=stopped + EXIT_S + waste_at_exit,
                       detail="" if status is TrialStatus.OK else f"ended {status.value}")


def runs(candidate: Candidate, steps: list[float], *, status=TrialStatus.OK, **kw) -> list[Pair]:
    """One round per step time: the short and the long run of ``LENGTHS``."""
    return [Pair(short=run(candidate, s, LENGTHS.short, status=status, **kw),
                 long=run(candidate, s, LENGTHS.long, status=status, **kw)) for s in steps]


def decide(base, cand, floor=1.02, candidate=FAST, untrusted=False) -> Verdict:
    return judge(candidate, base, cand, lengths=LENGTHS, floor=floor, compare_steps=3, untrusted=untrusted)


def test_whole_process_per_step_is_the_difference_of_the_two_lengths():
    short, long = run(FAST, 0.02, 1, startup=3.0), run(FAST, 0.02, 6, startup=3.0)
    measured = whole_process(short, long, LENGTHS)
    assert measured.step_s == pytest.approx(0.02)
    assert measured.startup_s == pytest.approx(3.0 + EXIT_S)
    assert measured.job_s == pytest.approx(3.0 + EXIT_S + 100 * 0.02)
    # Time spent at exit only when stopped early would look like faster steps by the exits; the
    # stops (before that time) still show the real pace.
    wasted = whole_process(run(FAST, 0.02, 1, startup=3.0, waste_at_exit=0.08), long, LENGTHS)
    assert wasted.step_s == pytest.approx(0.02) and wasted.job_s > measured.job_s
    # Work deferred past the stop shows in the exits.
    deferred = TrialResult(status=TrialStatus.OK, candidate=FAST, stopped_s=3.0 + 6 * 0.001, process_s=3.0 + 6 * 0.02 + EXIT_S)
    early = TrialResult(status=TrialStatus.OK, candidate=FAST, stopped_s=3.0 + 0.001, process_s=3.0 + 0.02 + EXIT_S)
    assert whole_process(early, deferred, LENGTHS).step_s == pytest.approx(0.02)
    assert whole_process(TrialResult(status=TrialStatus.OK, candidate=FAST), long, LENGTHS) is None


def test_the_short_length_holds_the_warm_up_and_the_long_one_the_contract():
    from infrarsi.contract import Workload

    def workload(warmup: int, measured: int, planned: int = 200) -> Workload:
        return Workload(entry="train.py", command=["python", "train.py"], global_batch=1, seq_len=1,
                        tokens_per_step=1, seed=0, warmup_steps=warmup, measured_steps=measured, planned_steps=planned)

    assert Lengths.of(workload(3, 10)) == Lengths(short=3, long=13, planned=200)
    assert Lengths.of(workload(0, 5)) == Lengths(short=1, long=5, planned=200)
    assert Lengths.of(workload(0, 1)) == Lengths(short=1, long=2, planned=200)
    # Short steps against a spread start-up: the long length whose rounds cost least, start-ups
    # included; more steps between the two lengths when a start-up dominates (fewer rounds then
    # pay for the longer runs), never past the job nor 30 s of steps.
    readme = Lengths.of(workload(3, 10), step_s=0.2, startup_s=4.0, process_sd_s=0.04)
    slow_start = Lengths.of(workload(3, 10), step_s=0.2, startup_s=34.0, process_sd_s=0.04)
    assert 13 < readme.long < slow_start.long <= 3 + 150
    assert Lengths.of(workload(3, 10, planned=100), step_s=0.03, startup_s=4.0, process_sd_s=0.1).long <= 100
    assert Lengths.of(workload(3, 10), step_s=10.0, startup_s=4.0, process_sd_s=0.1).long == 13  # long steps
    assert Lengths.of(workload(3, 10, planned=5000), step_s=0.01, startup_s=4.0, process_sd_s=1.0).long <= 3 + 3000
    # Each round's spread: the README's job at its lengths, about 2%; two rounds decide a 1.10x there.
    assert 0.01 < readme.round_cv(step_s=0.2, startup_s=4.0, process_sd_s=0.04) < 0.03
    assert Lengths.recorded(workload(3, 10), [3, 40]) == Lengths(short=3, long=40, planned=200)
    assert Lengths.recorded(workload(3, 10), []) == Lengths.of(workload(3, 10))


def test_a_search_trials_job_seconds_is_start_up_plus_the_planned_steps():
    assert job_seconds(run(FAST, 0.02, 6, startup=3.0), PLANNED) == pytest.approx(3.0 + 100 * 0.02)
    assert job_seconds(run(FAST, 0.02, 6, startup=None), PLANNED) == pytest.approx(2.0)
    # A compiling candidate's warm-up is paid once, beside its steady steps.
    compiled = replace(run(FAST, 0.02, 6, startup=3.0), warmup_times=[30.0, 1.0, 0.02])
    assert job_seconds(compiled, PLANNED) == pytest.approx(3.0 + 29.98 + 0.98 + 100 * 0.02)
    assert job_seconds(TrialResult(status=TrialStatus.OOM, candidate=FAST), PLANNED) is None


def test_a_clear_speedup_with_every_rerun_ok_is_promoted():
    verdict = decide(runs(BASE, [0.138, 0.139, 0.1385]), runs(FAST, [0.0233, 0.0234, 0.0232],
                                                                  losses=[4.0, 3.8, 3.6100001, 99.0]))
    assert verdict.promoted and "clears the promotion floor 1.020" in verdict.reason
    point, low, high = verdict.job_speedup
    assert low > 1.02 and low < point < high
    assert point == pytest.approx((1.3 + 100 * 0.1385) / (1.3 + 100 * 0.0233), rel=0.01)
    assert verdict.step_speedup[0] == pytest.approx(0.1385 / 0.0233, rel=0.01)
    assert verdict.record_step_speedup[0] == pytest.approx(verdict.step_speedup[0]) and not verdict.contract
    assert verdict.statuses == ["ok"] * 6 and verdict.peak_bytes == 50_000_000
    assert verdict.base_step_s == pytest.approx([0.138, 0.139, 0.1385])
    # Losses are compared over the contract's first steps only (step 4 differs, outside them).
    assert verdict.max_loss_diff == pytest.approx(1e-7, abs=1e-6)
    assert Verdict.from_dict(verdict.to_dict()) == verdict


def test_a_rerun_that_fails_refuses_the_promotion_however_fast_the_others():
    cand = runs(FAST, [0.023, 0.023]) + [Pair(short=run(FAST, 0.023, 1), long=run(FAST, 0.0, 6, status=TrialStatus.OOM))]
    verdict = decide(runs(BASE, [0.138, 0.139, 0.1385]), cand)
    assert not verdict.promoted and verdict.job_speedup is None
    assert verdict.reason.startswith("1 of 6 reruns ended oom") and verdict.statuses == ["ok"] * 5 + ["oom"]
    numerics = runs(FAST, [0.023, 0.023], status=TrialStatus.NUMERICS)
    assert "ended numerics" in decide(runs(BASE, [0.138, 0.139]), numerics).reason


def test_a_speedup_inside_the_noise_is_not_promoted():
    # 1% faster, the floor is 2%: however tight the interval, its low bound is under the floor.
    verdict = decide(runs(BASE, [0.1000, 0.1001, 0.0999]), runs(FAST, [0.0990, 0.0991, 0.0989]))
    assert not verdict.promoted and verdict.job_speedup[0] > 1
    assert "does not clear the promotion floor 1.020" in verdict.reason
    # A big but noisy speedup: the point clears the floor, the interval's low bound does not.
    noisy = decide(runs(BASE, [0.10, 0.20, 0.30]), runs(FAST, [0.05, 0.15, 0.25]))
    assert noisy.job_speedup[0] > 1.02 and noisy.job_speedup[1] <= 1.02 and not noisy.promoted
    # The same clear speedup against a higher floor is refused.
    assert not decide(runs(BASE, [0.138, 0.139]), runs(FAST, [0.0233, 0.0234]), floor=10.0).promoted


def test_too_few_reruns_give_no_interval_and_no_promotion():
    lonely_base = decide(runs(BASE, [0.138]) + runs(BASE, [0.0], status=TrialStatus.CRASH), runs(FAST, [0.02, 0.02]))
    assert not lonely_base.promoted and lonely_base.reason.startswith("fewer than two baseline rounds were measured")
    one = decide(runs(BASE, [0.138, 0.139]), runs(FAST, [0.02]))
    assert not one.promoted and one.reason == "too few rounds for an interval"


def test_the_best_promoted_is_the_fastest_that_cleared_the_floor():
    base = runs(BASE, [0.138, 0.139, 0.1385])
    a = decide(base, runs(FAST, [0.023, 0.0231, 0.0232]))
    b = decide(base, runs(Candidate(knobs={"micro_batch_size": 8}), [0.030, 0.0301, 0.0302]),
               candidate=Candidate(knobs={"micro_batch_size": 8}))
    refused = decide(base, runs(FAST, [0.01, 0.01]) + runs(FAST, [0.01], status=TrialStatus.TIMEOUT))
    assert a.promoted and b.promoted and not refused.promoted
    assert best_promoted([b, refused, a]) is a
    assert best_promoted([refused]) is None and best_promoted([]) is None
    # A noisier but faster candidate beats a tighter, slower one once both cleared the floor.
    noisy_fast = decide(base, runs(FAST, [0.020, 0.023, 0.026]))
    assert noisy_fast.promoted and noisy_fast.job_speedup[1] < a.job_speedup[1]
    assert best_promoted([a, noisy_fast]) is noisy_fast


def _scripted(times: dict[int, list[float]], order: list[tuple[int, int]], *, failing: int | None = None):
    """run_one that gives each micro-batch size its scripted step times, round by round."""

    def run_one(candidate: Candidate, round_: int, steps: int) -> TrialResult:
        mb = candidate.knobs["micro_batch_size"]
        if steps == LENGTHS.long:
            order.append((mb, round_))
        status = TrialStatus.OOM if mb == failing else TrialStatus.OK
        return run(candidate, times[mb][round_], steps, status=status)

    return run_one


def _interleave(candidates, run_one, rounds=ROUNDS, reference=()):
    return interleave(candidates, BASE, run_one, rounds=rounds, lengths=LENGTHS, floor=1.05, compare_steps=3,
                      reference=reference, order=random.Random(0))


def test_interleave_runs_the_arms_round_robin_and_drops_a_candidate_equal_to_the_baseline():
    order: list[tuple[int, int]] = []
    other = Candidate(knobs={"micro_batch_size": 8})
    times = {2: [0.100, 0.101, 0.099, 0.100], 16: [0.050, 0.051, 0.049, 0.050], 8: [0.0995, 0.1005, 0.099, 0.101]}
    verdicts, base_runs = _interleave([FAST, Candidate(knobs=dict(BASE.knobs)), other], _scripted(times, order))
    # Two rounds decide both: FAST is promoted, mb8 (same speed as the baseline) cannot clear the floor.
    assert sorted(order, key=lambda o: (o[1], o[0])) == [(2, 0), (8, 0), (16, 0), (2, 1), (8, 1), (16, 1)]
    assert [v.candidate for v in verdicts] == [FAST, other]
    assert verdicts[0].promoted and not verdicts[1].promoted and len(base_runs) == 2
    assert verdicts[0].cand_step_s == pytest.approx([0.050, 0.051])
    assert "error spent over 3 looks, 2 candidates" in verdicts[0].reason


def test_interleave_adds_rounds_while_a_noisy_interval_straddles_the_floor():
    order: list[tuple[int, int]] = []
    # One slow candidate round (a busy machine) leaves rounds 2 and 3 undecided; round 4 settles it.
    times = {2: [0.100, 0.101, 0.100, 0.101, 0.100], 16: [0.070, 0.085, 0.071, 0.070, 0.0705]}
    (verdict,), base_runs = _interleave([FAST], _scripted(times, order), Rounds(least=2, most=5))
    assert len(base_runs) == len(verdict.cand_step_s) == 4
    assert verdict.promoted and verdict.job_speedup[1] > 1.05


def test_interleave_stops_at_most_rounds_and_early_on_a_failed_rerun():
    order: list[tuple[int, int]] = []
    # mb16 is about 1.11x faster, its interval within reach of the floor after every round but the last.
    times = {2: [0.100, 0.104, 0.098, 0.103], 16: [0.090, 0.092, 0.089, 0.094], 8: [0.05] * 4}
    verdicts, base_runs = _interleave([FAST, Candidate(knobs={"micro_batch_size": 8})],
                                      _scripted(times, order, failing=8))
    undecided, failed = verdicts
    # The failing candidate ran once; the undecided one ran every round allowed and was not promoted.
    assert order.count((8, 0)) == 1 and not any(mb == 8 and r > 0 for mb, r in order)
    assert failed.statuses == ["oom", "oom"] and not failed.promoted
    assert len(base_runs) == 4 and len(undecided.cand_step_s) == 4 and not undecided.promoted


def test_a_candidate_whose_rounds_were_disturbed_gets_the_rounds_it_lacks():
    """The README job's second run of 2026-12-07 (12:45 UTC): the candidate's short runs of its
    first round stayed disturbed through their reruns, so after the least rounds it had one measured
    round, no interval, and left the rotation "too few rounds for an interval" while rounds were
    left. It stays while it has fewer than two and the rounds allow."""
    order: list[tuple[int, int]] = []
    times = {2: [0.100, 0.101, 0.100, 0.101], 16: [0.050, 0.051, 0.049, 0.050]}
    scripted = _scripted(times, order)

    def run_one(candidate: Candidate, round_: int, steps: int) -> TrialResult:
        if candidate == FAST and round_ == 0 and steps == LENGTHS.short:
            return run(candidate, 0.2, steps, status=TrialStatus.DISTURBED)
        return scripted(candidate, round_, steps)

    (verdict,), base_runs = _interleave([FAST], run_one, Rounds(least=2, most=4))
    assert len(verdict.cand_job_s) >= 2 and verdict.job_speedup is not None
    assert verdict.promoted and len(base_runs) == 3
    # Disturbed in every round: no interval after the most rounds, and no promotion.
    always = _interleave([FAST], lambda c, r, n: run(c, 0.2, n, status=TrialStatus.DISTURBED) if c == FAST
                         else scripted(c, r, n), Rounds(least=2, most=4))[0][0]
    assert always.job_speedup is None and not always.promoted


def test_a_candidate_no_faster_than_the_baseline_leaves_after_the_least_rounds():
    """Futility: 2% faster on noise of a few percent could not clear 1.05 however many rounds ran,
    so it costs `least` rounds, not `most`; a noisy 1.2x one stays while it is within reach."""
    order: list[tuple[int, int]] = []
    times = {2: [0.100, 0.103, 0.099, 0.102, 0.100, 0.101], 16: [0.098, 0.101, 0.097, 0.100, 0.098, 0.099],
             8: [0.080, 0.088, 0.079, 0.085, 0.081, 0.083]}
    verdicts, base_runs = _interleave([FAST, Candidate(knobs={"micro_batch_size": 8})], _scripted(times, order),
                                      Rounds(least=3, most=6))
    same, noisy = verdicts
    assert len(same.cand_step_s) == 3 and not same.promoted
    assert len(noisy.cand_step_s) > 3 and len(base_runs) == len(noisy.cand_step_s)


def test_futility_projects_the_interval_to_the_rounds_left():
    level, floor = 0.99, 1.05
    assert futile(SpeedupInterval(1.06, 0.95, 1.18), 3, 6, level, floor)  # above the floor, too close to clear it
    assert futile(SpeedupInterval(1.04, 0.8, 1.3), 3, 6, level, floor)  # the point is below the floor
    within_reach = SpeedupInterval(1.15, 0.97, 1.36)
    assert not futile(within_reach, 3, 6, level, floor)
    assert futile(within_reach, 6, 6, level, floor)  # no rounds left


def test_rounds_refuse_fewer_than_two():
    with pytest.raises(ValueError, match="least"):
        Rounds(least=1, most=3)
    assert Rounds(least=3, most=6).looks == 4


def test_only_candidates_ranked_ahead_of_the_baseline_are_verified():
    a, b, base = (Candidate(knobs={"mb": v}) for v in (8, 16, 4))
    assert ahead_of_baseline([a, b, base], base, 2) == [a, b]
    assert ahead_of_baseline([a, base, b], base, 2) == [a]
    assert ahead_of_baseline([base, a, b], base, 2) == []
    assert ahead_of_baseline([a, b], base, 1) == [a]


def test_work_moved_before_the_first_step_is_not_a_speedup():
    """A model's diff trains the steps during start-up, then steps through cached results: both
    lengths take as long, so their difference says the steps are almost free. The start-up grew by
    less than its check allows (max(1 s, 25%)), but code InfraRSI did not write is held to the
    baseline's start-up, and its long run less that start-up is the real pace: not promoted.
    Compilation, which declares its one-off cost, is."""
    llm = Candidate(patches=("llm:0123456789ab",))
    base = runs(BASE, [0.138, 0.139, 0.1385], startup=4.0)
    forged = [Pair(short=run(llm, 0.001, 1, startup=4.0 + 6 * s), long=run(llm, 0.001, 6, startup=4.0 + 6 * s))
              for s in (0.138, 0.139, 0.1385)]
    verdict = decide(base, forged, candidate=llm, untrusted=True)
    assert not verdict.promoted and verdict.step_speedup[0] == pytest.approx(1.0, abs=0.02), verdict.reason
    assert verdict.record_step_speedup[0] > 100  # what the step records alone would have promoted
    # Moved further, the start-up check names it.
    far = [Pair(short=run(llm, 0.001, 1, startup=9.0), long=run(llm, 0.001, 6, startup=9.0))] * 3
    assert "work done before the first step" in decide(base, far, candidate=llm, untrusted=True).reason
    compiled = judge(FAST, base, forged, lengths=LENGTHS, floor=1.02, compare_steps=3, declared_startup_s=None,
                     untrusted=True)
    assert compiled.promoted, compiled.reason


def test_a_knob_whose_start_up_really_grows_is_measured_by_the_differences_alone():
    """A bigger micro-batch allocates more before its first step: 50 ms more start-up is its own,
    not work of the steps, and its records and whole processes agree (the paced job's best)."""
    base = runs(BASE, [0.138, 0.139, 0.1385])
    bigger = runs(FAST, [0.0233, 0.0234, 0.0232], startup=1.05)
    verdict = decide(base, bigger)
    assert verdict.promoted and not verdict.contract
    assert verdict.step_speedup[0] == pytest.approx(0.1385 / 0.0233, rel=0.01)


def test_step_records_that_disagree_with_the_wall_time_are_a_contract_breach():
    """Records released in a burst (or held back) tell another pace than the whole processes:
    refused whatever either says, and both figures are kept for the report."""
    base = runs(BASE, [0.138, 0.139, 0.1385])
    burst = runs(FAST, [0.100, 0.101, 0.0995], recorded=0.001)
    verdict = decide(base, burst)
    assert not verdict.promoted and verdict.reason.startswith("contract: the job's step records disagree")
    assert verdict.record_step_speedup[0] > 100 and verdict.step_speedup[0] == pytest.approx(1.38, rel=0.01)
    honest = decide(base, runs(FAST, [0.100, 0.101, 0.0995], recorded=0.1005))
    assert honest.promoted and not honest.contract


def _poisoning(order: list[str], hog_s: float, limit_s: float | None):
    """run_one for two arms of the same speed, where every run of the candidate (the search's last
    trial among them) leaves the machine slower for the next process: its start-up takes
    ``hog_s`` more (the page cache of the shared read-only mounts evicted). With ``limit_s`` each
    run's start-up is held to doctor's (``accounting.startup_jumped``) as verification's runner
    holds it: a jumped run is disturbed and rerun once the machine is itself again."""
    from infrarsi.runner.accounting import startup_jumped

    left = [hog_s]

    def run_one(candidate: Candidate, _round: int, steps: int) -> TrialResult:
        arm = "cand" if candidate == FAST else "base"
        order.append(arm)
        hit, left[0] = left[0], (hog_s if arm == "cand" else 0.0)
        result = run(candidate, 0.1, steps, startup=1.0 + hit)
        if startup_jumped(result.startup_s, limit_s):
            return run(candidate, 0.1, steps, startup=1.0)
        return result

    return run_one


def test_a_candidate_that_leaves_the_machine_slower_for_the_next_run_is_not_promoted():
    """A run that leaves the machine slower (a leftover process, the page cache evicted) slows
    whichever run comes next. In the fixed order (baseline, candidate; long, then short) both of
    the baseline's runs followed the candidate's, and the baseline looked slower: promoted. Shuffled
    rounds spread the harm over both arms, and a run whose start-up jumps past doctor's is rerun."""
    fixed = random.Random(0)
    fixed.shuffle = lambda runs: runs.sort(key=lambda r: (r[1] != LENGTHS.long, r[0]))  # the old order
    order: list[str] = []
    (old,), _ = interleave([FAST], BASE, _poisoning(order, hog_s=0.5, limit_s=None), rounds=Rounds(least=3, most=6),
                           lengths=LENGTHS, floor=1.01, compare_steps=3, order=fixed)
    assert old.promoted and order[:4] == ["base", "cand", "base", "cand"]
    for seed in range(10):
        (held,), _ = interleave([FAST], BASE, _poisoning([], hog_s=0.5, limit_s=1.2), rounds=Rounds(least=3, most=6),
                                lengths=LENGTHS, floor=1.01, compare_steps=3, order=random.Random(seed))
        assert not held.promoted, (seed, held.reason)


def test_every_round_runs_each_arm_at_both_lengths_in_a_shuffled_order():
    seen: list[tuple[str, int]] = []

    def run_one(candidate: Candidate, _round: int, steps: int) -> TrialResult:
        seen.append(("cand" if candidate == FAST else "base", steps))
        return run(candidate, 0.1, steps)

    orders = set()
    for seed in range(8):
        seen.clear()
        pairs = run_pairs([BASE, FAST], run_one, 0, LENGTHS, random.Random(seed))
        assert sorted(seen) == sorted([("base", 1), ("base", 6), ("cand", 1), ("cand", 6)])
        assert [p.long.candidate for p in pairs] == [BASE, FAST] and all(p.short.steps_run == 0 for p in pairs)
        orders.add(tuple(seen))
    assert len(orders) > 3


def test_doctors_pair_is_the_first_baseline_round_and_never_run_again():
    order: list[tuple[int, int]] = []
    times = {2: [0.100, 0.101, 0.099], 16: [0.050, 0.051, 0.049]}
    reference = tuple(runs(BASE, [0.1005]))
    (verdict,), base_pairs = _interleave([FAST], _scripted(times, order), Rounds(least=2, most=3), reference)
    assert base_pairs[0] is reference[0] and len(base_pairs) == len(verdict.cand_job_s) + 1
    assert verdict.promoted and len(verdict.base_job_s) == 3


def test_the_error_spent_over_looks_and_candidates_adds_up_to_the_confidence():
    rounds = Rounds(least=2, most=5)
    spent = sum(1 - rounds.level(look, arms=3) for look in range(1, rounds.looks + 1)) * 3
    assert spent == pytest.approx(0.05)
    # The first look spends least: only a large gain is certified there; the last keeps most.
    assert rounds.level(1) > rounds.level(2) > rounds.level(rounds.looks)
    assert rounds.look(1) == 1 and rounds.look(2) == 1 and rounds.look(9) == rounds.looks


def test_rounds_are_sized_from_the_noise_doctor_expects():
    from infrarsi.contract import VerifyPolicy

    policy = VerifyPolicy(least_rounds=2, most_rounds=6)
    quiet_, noisy, hopeless = (Rounds.sized(policy, SpreadPrior(cv, 2), 1.01, reference=1) for cv in (0.01, 0.035, 0.5))
    assert quiet_.most == 2 and 2 < noisy.most < 6 and hopeless.most == 6
    assert Rounds.sized(policy, None, 1.01) == Rounds(least=2, most=6)
    # Two candidates share the error: more rounds for the same noise.
    assert Rounds.sized(policy, SpreadPrior(0.035, 2), 1.01, arms=2, reference=1).most >= noisy.most


def test_a_candidate_the_search_measured_far_ahead_is_planned_fewer_rounds():
    """Rounds are planned for the gain the search's trials make believable, never for less than
    TARGET_GAIN: at the same noise a 1.4x candidate is planned fewer rounds than a 1.10x one, so its
    one look spends all the error where the 1.10x's first of five spends a sliver."""
    from infrarsi.contract import VerifyPolicy

    policy, prior = VerifyPolicy(least_rounds=2, most_rounds=6), SpreadPrior(0.05, 2)
    unknown, small, large = (Rounds.sized(policy, prior, 1.01, reference=1, gain=g) for g in (None, 1.10, 1.4))
    assert unknown == small and large.most < small.most
    assert large.level(1) == pytest.approx(0.95) and small.level(1) > 0.99
    assert Rounds.sized(policy, prior, 1.01, reference=1, gain=1.02) == small


def test_an_honest_jobs_records_are_judged_against_a_moderated_per_step_interval():
    """Three rounds whose per-step figures agree by chance (to 0.1%) made an unmoderated interval
    so narrow that an honest job's records, 2% off it because both its long runs started 10 ms
    late, read as a contract breach. Moderated toward doctor's expected spread, they do not, and
    records that lie (a burst) still do."""
    base = runs(BASE, [0.138, 0.1381, 0.1380])
    late = [Pair(short=run(FAST, s, LENGTHS.short), long=run(FAST, s, LENGTHS.long, startup=1.01))
            for s in (0.100, 0.1001, 0.0999)]
    prior = SpreadPrior(0.02, 2)

    def verdict(cand: list[Pair], spread: SpreadPrior | None) -> Verdict:
        return judge(FAST, base, cand, lengths=LENGTHS, floor=1.01, compare_steps=3, prior=spread)

    assert verdict(late, None).contract  # the premise: unmoderated, the honest job is refused
    honest = verdict(late, prior)
    assert honest.promoted and not honest.contract
    assert verdict(runs(FAST, [0.100, 0.101, 0.0995], recorded=0.001), prior).contract


def test_the_pooled_spread_narrows_the_interval_unless_the_candidate_is_noisier():
    from infrarsi.noise import pooled_speedup_interval, speedup_interval

    base, cand, other = [10.0, 10.2, 9.9], [8.0, 8.1, 7.95], [9.0, 9.1, 8.95, 9.05]
    welch, pooled = speedup_interval(base, cand, 0.99), pooled_speedup_interval(base, cand, 0.99, (other,))
    assert pooled.point == welch.point and welch.low < pooled.low < pooled.point < pooled.high < welch.high
    noisy = [8.0, 9.5, 7.0]
    assert pooled_speedup_interval(base, noisy, 0.99, (other,)) == speedup_interval(base, noisy, 0.99)


def test_the_pool_is_moderated_toward_the_spread_doctor_expects():
    """Two rounds that agree by chance are not read as a quiet machine, nor are two rounds worth
    only t at three degrees of freedom: doctor's expected spread enters with its own."""
    from infrarsi.noise import pooled_speedup_interval

    base, cand = [40.6, 40.8, 42.5], [30.0, 30.7]
    bare = pooled_speedup_interval(base, cand, 0.99)
    sharper = pooled_speedup_interval(base, cand, 0.99, prior=SpreadPrior(0.02, 2))
    assert sharper.point == bare.point and bare.low < sharper.low and sharper.high < bare.high
    # Rounds that agree to 0.1% borrow no such precision: the prior's spread widens them.
    lucky_base, lucky_cand = [40.00, 40.04], [30.00, 30.03]
    lucky = pooled_speedup_interval(lucky_base, lucky_cand, 0.99)
    held = pooled_speedup_interval(lucky_base, lucky_cand, 0.99, prior=SpreadPrior(0.03, 4))
    assert held.low < lucky.low and held.high > lucky.high
    # A prior of no degrees of freedom is no prior.
    assert pooled_speedup_interval(base, cand, 0.99, prior=SpreadPrior(0.02, 0)) == bare


def test_a_noisy_candidates_interval_is_moderated_but_never_borrows_the_pool():
    """Issue 49's A/A campaign 12: two wild rounds of a candidate gave Welch's t at about one degree
    of freedom, [0.000, 1.2e10]. Moderated, it is still wide and still promotes nothing, yet says
    something; a quiet candidate's interval stays far narrower."""
    from infrarsi.noise import pooled_speedup_interval

    base, wild, quiet = [40.6, 40.8, 42.5], [20.0, 45.0], [30.0, 30.7]
    prior = SpreadPrior(0.03, 2)
    raw = pooled_speedup_interval(base, wild, 0.95)
    held = pooled_speedup_interval(base, wild, 0.95, prior=prior)
    assert held.point == raw.point and raw.low < held.low < 1.0 < held.high < raw.high
    assert held.high / held.low > 1.5
    calm = pooled_speedup_interval(base, quiet, 0.95, prior=prior)
    assert calm.high / calm.low < 1.2 < held.high / held.low


def test_a_process_that_keeps_its_own_pace_widens_the_rounds_expected_spread():
    """The A/A campaigns of issue 49 measured the same configuration 2-5% apart process to process:
    doctor's runs' median steps that differ that much make verification plan for it."""
    lengths = Lengths(short=3, long=45, planned=200)
    steady = lengths.round_cv(step_s=0.2, startup_s=2.2, process_sd_s=0.05)
    paced = lengths.round_cv(step_s=0.2, startup_s=2.2, process_sd_s=0.05, step_cv=0.04)
    assert paced > 1.5 * steady and paced == pytest.approx(0.04, rel=0.1)


def test_doctors_round_is_left_out_when_the_machines_pace_moved_since():
    """The first A/A campaign of issue 49: doctor's pair projected 62 s of job, the run's own
    baseline rounds 41-46 s. Kept, it would have made the baseline look 10% slower."""
    from infrarsi.whole_process import drifted

    prior = SpreadPrior(0.03, 2)
    assert drifted(62.2, [41.0, 42.1, 43.0], prior)
    assert not drifted(43.9, [41.0, 42.1, 43.0], prior)
    assert not drifted(62.2, [41.0], prior)  # one round of its own says nothing of its spread
    # Rounds that spread widely themselves make room for doctor's.
    assert not drifted(62.2, [40.0, 55.0, 48.0], prior)


def test_doctors_round_a_third_off_two_agreeing_rounds_of_the_runs_own_is_left_out():
    """Round four's README runs 1 and 2: doctor's round 33% and 11% off the run's own two, which
    agreed within 7% and 0.4%; kept, run 1's interval was 1.54x [1.04, 2.29]."""
    from infrarsi.whole_process import drifted

    assert drifted(61.16, [44.41, 47.71], SpreadPrior(0.064, 2))
    assert drifted(46.35, [52.38, 52.16], SpreadPrior(0.025, 2))
    assert not drifted(46.35, [44.41, 47.71], SpreadPrior(0.064, 2))


def test_a_verdict_leaves_out_doctors_drifted_round_and_says_so():
    doctor = runs(BASE, [0.15])  # the machine was slow when doctor ran: 16 s of job against 11
    own = runs(BASE, [0.100, 0.101, 0.099])
    cand = runs(FAST, [0.100, 0.101, 0.099])  # the same job: an A/A
    kept = judge(FAST, doctor + own, cand, lengths=LENGTHS, floor=1.02, compare_steps=3,
                 prior=SpreadPrior(0.01, 2))
    left = judge(FAST, doctor + own, cand, lengths=LENGTHS, floor=1.02, compare_steps=3,
                 prior=SpreadPrior(0.01, 2), reference=1)
    assert len(kept.base_job_s) == 4 and kept.job_speedup[0] > 1.09
    assert len(left.base_job_s) == 3 and left.job_speedup[0] == pytest.approx(1.0, abs=0.01)
    assert not left.promoted and "doctor's baseline round" in left.reason and "left out" in left.reason
