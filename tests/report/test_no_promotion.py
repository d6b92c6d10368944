"""A run that promotes nothing says the best candidate it measured with its interval, its trials by
status, the likely reason and the next step: in the terminal outcome, report.md and report.html."""

from __future__ import annotations

from dataclasses import replace

from infrarsi.background import Background
from infrarsi.cli import outcome
from infrarsi.records import Disturbance
from infrarsi.report import document, html, markdown
from infrarsi.report.no_promotion import explain
from infrarsi.stages.optimize import OptimizeResult
from infrarsi.stages.report import ReportResult
from tests.report.values import REPO, candidate, contract, report, row, run, verdict


def searched(*rows, **fields):
    return run([row(0, "baseline", "ok", 150.0), *rows], **fields)


def test_the_best_search_trial_with_doctor_s_noise_as_its_interval_when_the_budget_ended_the_search():
    why = explain(searched(row(1, "search", "ok", 155.0, micro_batch=8), row(2, "search", "ok", 151.5, micro_batch=2),
                           row(3, "search", "oom", micro_batch=8, attention="sdpa")), contract(), REPO)
    point = 150.0 / 151.5
    assert why.best == (f"Best measured: micro_batch=2, {point:.3f}x the baseline's speed [{point / 1.04:.3f}, "
                        f"{point * 1.04:.3f}] (trial 2: one run against the baseline's, the interval from doctor's "
                        "run-to-run noise)")
    assert why.trials == "Trials: 4 (3 search, 1 baseline): 3 ok, 1 oom"
    assert why.reason.startswith("the budget of 4 trials ended the search after 3 search trials")
    assert why.next_step.startswith(f"more trials: `infrarsi run {REPO} --trials 10` runs that many more")
    # A knob whose role init could not read stayed fixed: the next step says so and how to unlock it.
    assert "warmup_ratio had no role it could read" in why.next_step


def test_a_re_verified_candidate_whose_interval_straddles_the_floor():
    v = verdict(candidate(attention="sdpa"), (1.03, 0.99, 1.07), promoted=False,
                reason="its interval straddles the floor")
    why = explain(searched(row(1, "search", "ok", 140.0, attention="sdpa"), verdicts=[v]), contract(), REPO)
    assert why.best.startswith("Best measured: attention=sdpa, 1.030x the baseline's speed [0.990, 1.070] (95% CI "
                               "over 3 interleaved rounds")
    # What would decide it, from what its rounds measured: their spread (1.3% a round) needs about
    # 9 rounds for a 1.03x gain over the 1.01 floor.
    assert why.reason.startswith("its interval reaches down to 0.990x over 3 rounds whose job times spread 1.3% a "
                                 "round: a 1.030x gain at this spread needs about 9 rounds")
    assert why.next_step.startswith("more rounds: `most_rounds = 9` in the contract's [verify] table")


def test_undecided_advice_follows_the_cause():
    """A machine busier than doctor measured: a quieter machine. A gain too small for any number of
    rounds at this spread: longer runs. No gain: nothing."""
    from infrarsi.report.no_promotion import undecided

    v = verdict(candidate(attention="sdpa"), (1.03, 0.99, 1.07), promoted=False)
    busy, _ = undecided(v, 1.01, 0.004, "infrarsi run r")
    assert "3.3x the 0.4% doctor's baseline runs led to expect" in busy
    assert undecided(v, 1.01, 0.004, "infrarsi run r")[1] == "a quieter machine: `infrarsi run r --wait-for-quiet`"
    noisy = replace(v, job_speedup=(1.012, 0.9, 1.1), base_job_s=[150.0, 170.0, 135.0])
    assert undecided(noisy, 1.01, None, "infrarsi run r")[1].startswith("longer runs: each round's spread falls")
    none = replace(v, job_speedup=(1.0, 0.98, 1.02))
    assert "no number of rounds would promote it" in undecided(none, 1.01, None, "r")[0]


def test_no_candidate_measured_when_every_search_trial_ran_out_of_memory():
    why = explain(searched(row(1, "search", "oom", micro_batch=8), row(2, "search", "oom", micro_batch=2)),
                  contract(), REPO)
    assert why.best == "Best measured: none; no candidate other than the baseline ended ok"
    assert why.reason == "no candidate ran to the end: 2 oom"
    assert why.next_step.startswith("a larger memory budget (`--budget-gib`)")


def test_a_disturbed_run_points_at_the_machine():
    disturbance = Disturbance(trials=2, of_trials=4, seconds=20.0, share=0.5, reruns=(), waited_s=0.0,
                              background=Background.unmeasured(2), max_reruns=2, renormalized=(), unresolved=())
    why = explain(searched(row(1, "search", "ok", 155.0, micro_batch=8), row(2, "search", "disturbed", micro_batch=2),
                           row(3, "search", "disturbed", micro_batch=2), disturbance=disturbance), contract(), REPO)
    assert why.reason == "other processes disturbed 2 of 4 trials (50% of the trial time)"
    assert "--wait-for-quiet" in why.next_step


def test_nothing_tunable_says_which_knobs_are_locked_or_unread():
    locked = contract()
    locked = replace(locked, knobs=[replace(k, tunable=False, domain=[]) for k in locked.knobs])
    why = explain(searched(), locked, REPO)
    assert why.reason == "nothing to search: no knob is tunable and no patch validated (lr locked as the workload)"
    assert "warmup_ratio had no role" in why.next_step


def test_a_search_that_converged_within_the_noise_floor():
    why = explain(searched(row(1, "search", "ok", 152.0, micro_batch=8), search_ended="converged: nothing left"),
                  contract(), REPO)
    assert why.reason.startswith("no candidate measured faster than the baseline beyond doctor's noise floor (1.040x")
    assert why.next_step.startswith("a quieter machine lowers the floor")


def test_the_outcome_and_the_documents_say_it(tmp_path):
    r = report(searched(row(1, "search", "ok", 151.5, micro_batch=2)))
    assert r.no_promotion is not None and r.promoted_audit is None
    result = OptimizeResult(status=r.run_status, message=r.run_message,
                            report=ReportResult(status="ok", message="", report=r))
    text = "\n".join(outcome.lines(result, 80, REPO))
    assert text.startswith("Not promoted: no candidate ranked ahead of the baseline")
    assert "\n  Best measured: micro_batch=2, 0.990x the baseline's speed [" in text
    assert "\n  Likely reason: the budget of 4 trials ended the search" in text and "\n  Next: more trials:" in text
    assert "\nTrials: 2 in 20 s (2 ok)." in text
    blocks = document.blocks(r, {})
    md = markdown.render(blocks, tmp_path)
    assert "## Why nothing was promoted" in md
    assert f"- {r.no_promotion.trials}" in md and "- Likely reason: the budget of 4 trials" in md
    assert "Why nothing was promoted" in html.render(blocks, "report")
    promoted = report(searched(verdicts=[verdict(candidate(micro_batch=8), (1.2, 1.1, 1.3), promoted=True)]))
    assert promoted.no_promotion is None
