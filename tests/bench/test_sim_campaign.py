"""The simulated cluster as a trial backend, and campaigns on it through replay's loop."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from bench.sim.backend import NOISE_CV, SimTable
from bench.sim.campaign import campaign, make_strategy, reasons_table, summarize, summary_table, wrong_bank
from bench.sim.model import STARTUP_BASE_S
from bench.sim.space import MEASURED_STEPS, MICRO, PP, SPACES, TP, WARMUP_STEPS, ZERO
from infrarsi.bank import ExperienceBank
from infrarsi.trials import Candidate, TrialStatus


@pytest.fixture(scope="module")
def table() -> SimTable:
    return SimTable(SPACES["7b-8xh100"])


def _first(table: SimTable, status: str) -> Candidate:
    return next(c for c in table.space.all_candidates() if table.result(c).status == status)


def test_an_ok_trial_costs_its_start_up_and_steps_with_the_noise_asked_for(table):
    cand = table.space.baseline()
    sim = table.result(cand)
    rng = np.random.default_rng(0)
    trials = [table.trial(cand, rng, None) for _ in range(300)]
    t = trials[0]
    assert t.status is TrialStatus.OK
    assert (len(t.warmup_times), len(t.step_times)) == (WARMUP_STEPS, MEASURED_STEPS)
    assert t.wall_s == pytest.approx(sim.startup_s + sum(t.warmup_times) + sum(t.step_times))
    steps = [s for t in trials for s in t.step_times]
    assert statistics.fmean(steps) == pytest.approx(sim.step_s, rel=0.005)
    assert statistics.stdev(steps) / statistics.fmean(steps) == pytest.approx(NOISE_CV, rel=0.1)
    assert all(t.peak_bytes is not None and abs(t.peak_bytes / sim.peak_bytes - 1) < 0.05 for t in trials)


def test_an_oom_trial_costs_start_up_and_one_step_and_reports_no_peak(table):
    cand = _first(table, "oom")
    sim = table.result(cand)
    t = table.trial(cand, np.random.default_rng(0), None)
    assert t.status is TrialStatus.OOM and t.peak_bytes is None and not t.step_times
    assert sim.startup_s + 0.8 * sim.step_s < t.wall_s < sim.startup_s + 1.2 * sim.step_s
    assert table.job_s(cand.key()) == math.inf and table.speedup(cand.key()) == 1.0


def test_an_invalid_or_far_slower_trial_ends_early(table):
    base = table.space.baseline()
    bad = Candidate({**base.knobs, TP: 8, PP: 2})
    t = table.trial(bad, np.random.default_rng(0), None)
    assert t.status is TrialStatus.CRASH and t.wall_s == STARTUP_BASE_S and "GPUs" in t.detail
    sim = table.result(base)
    slow = table.trial(base, np.random.default_rng(0), abort_step_time=sim.step_s / 4)
    assert slow.status is TrialStatus.ABORTED_SLOW
    assert slow.wall_s < sim.startup_s + (WARMUP_STEPS + MEASURED_STEPS) * sim.step_s * 0.7


def test_the_sweep_moves_only_zero_and_micro_batch_and_stops_a_stage_at_its_first_oom(table):
    runs = campaign(table, "deepspeed", 1, 20)[0]
    base = table.space.baseline().knobs
    keys = [r["key"] for r in runs[1:]]
    cands = [table.candidate(k) for k in keys]
    assert all({n for n, v in c.knobs.items() if v != base[n]} <= {ZERO, MICRO} for c in cands)
    for stage in {c.knobs[ZERO] for c in cands}:
        statuses = [r["status"] for r, c in zip(runs[1:], cands, strict=True) if c.knobs[ZERO] == stage]
        assert "oom" not in statuses[:-1]
        micros = [c.knobs[MICRO] for c in cands if c.knobs[ZERO] == stage]
        assert micros == sorted(micros)


def test_optuna_asks_outside_the_space_are_given_back_not_run(table):
    runs = campaign(table, "tpe", 2, 8)
    assert sum(r.get("rejected", 0) for run in runs for r in run) > 0
    for run in runs:
        assert all(table.space.is_valid(table.candidate(r["key"])) for r in run)


def test_a_two_seed_campaign_tables_what_its_runs_measured(table):
    oracle = table.best.speedup
    runs = campaign(table, "infrarsi", 2, 6)
    assert [len(r) for r in runs] == [6, 6]
    for run in runs:
        assert run[0]["kind"] == "baseline" and run[0]["speedup"] == 1.0
        assert all(r["speedup"] == table.speedup(r["pick"]) for r in run)
    s = summarize("infrarsi", runs, oracle, 6)
    assert s.share == pytest.approx(statistics.median(r[-1]["speedup"] / oracle for r in runs))
    assert s.oom_mean == statistics.fmean(sum(r["status"] == "oom" for r in run) for run in runs)
    assert s.sim_hours == pytest.approx(statistics.median(sum(r["wall_s"] for r in run) for run in runs) / 3600)
    line = summary_table([s]).splitlines()[-1]
    assert line.startswith(f"| infrarsi | 2 | {s.share:.1%}") and f"{s.oom_mean:.1f} ({s.oom_max})" in line
    search = [r for run in runs for r in run if r["kind"] == "search"]
    rows = [line.split(" | ") for line in reasons_table(runs).splitlines()[2:]]
    assert sum(float(row[1]) for row in rows) == pytest.approx(len(search) / 2)
    assert sum(float(row[2]) for row in rows) == pytest.approx(sum(r["status"] == "oom" for r in search) / 2)


def test_the_wrong_bank_reverses_each_effect_and_promotes_the_slowest_fit(table, tmp_path):
    url = f"sqlite:///{tmp_path}/wrong.db"
    wrong_bank(table, url)
    plan = make_strategy("infrarsi+badbank", table, 0, url)
    base = table.space.baseline()
    micro2 = table.space.with_value(base, MICRO, 2)
    truth = math.log(table.result(micro2).step_s / table.result(base).step_s)
    assert plan.bank_priors.get(f"{MICRO}=2").time_log_mean == pytest.approx(-truth, abs=1e-6)
    slowest = max((c for c in table.space.all_candidates() if table.result(c).ok), key=lambda c: table.result(c).step_s)
    assert [s.key() for s in plan.seeds] == [slowest.key()]
    with ExperienceBank(url) as bank:
        assert len(bank.runs()) == 1
