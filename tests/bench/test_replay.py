"""The replay harness: every method runs on a tiny synthetic table, and its metrics are right.

The table is invented (known step times, one configuration that OOMs, one far slower), so the
oracle, the abort truncation and the metrics have exact expected values.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3

import numpy as np
import pytest

from bench.tuners import metrics, report
from bench.tuners.methods import METHODS
from bench.tuners.replay import replay
from bench.tuners.table import Table
from infrarsi.bank import BestConfig, ExperienceBank, WorkloadSignature
from infrarsi.contract import Knob, contract_path, save_contract
from infrarsi.hardware import fingerprint
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import contract_with
from infrarsi.trials import Candidate, TrialStatus

GIB = 1 << 30
PLANNED = 100
STARTUP = 2.0


def step_of(cand: Candidate) -> float:
    """Bigger micro-batches are faster; checkpointing +40 %; the patch -10 %; bf16 8x slower."""
    step = {2: 1.0, 4: 0.8, 8: 0.6}[cand.knobs["micro_batch_size"]]
    step *= 1.4 if cand.knobs["activation_checkpointing"] else 1.0
    step *= 0.9 if "sdpa_attention" in cand.patches else 1.0
    return step * (8.0 if cand.knobs["dtype"] == "bfloat16" else 1.0)


def run_of(cand: Candidate, jitter: float) -> dict:
    if cand.knobs["micro_batch_size"] == 8 and not cand.knobs["activation_checkpointing"]:
        return {"status": "oom", "step_times": [], "warmup_times": [], "startup_s": STARTUP, "wall_s": 4.0,
                "peak_bytes": 2 * GIB, "detail": "over budget"}
    steps = [step_of(cand) * jitter] * 6
    return {"status": "ok", "step_times": steps, "warmup_times": [step_of(cand)] * 2, "startup_s": STARTUP,
            "wall_s": STARTUP + sum(steps) + 2 * step_of(cand), "peak_bytes": GIB // 2, "detail": ""}


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Table:
    knobs = [
        Knob(name="micro_batch_size", role="micro_batch", type="int", default=2, flag="--micro_batch_size",
             domain=[2, 4, 8], tunable=True),
        Knob(name="activation_checkpointing", role="activation_checkpointing", type="bool", default=False,
             flag="--activation_checkpointing", flag_style="store_true", domain=[False, True], tunable=True),
        Knob(name="dtype", role="dtype", type="str", default="float32", flag="--dtype",
             domain=["float32", "bfloat16"], tunable=True),
        Knob(name="batch_size", role="workload", type="int", default=16, flag="--batch_size"),
    ]
    contract = contract_with(knobs, budget_bytes=GIB, planned_steps=PLANNED)
    repo = tmp_path_factory.mktemp("contract")
    save_contract(contract, repo)
    space = SearchSpace.from_contract(contract, ["sdpa_attention"])
    rows = [{"candidate": c.to_dict(), "short": False, "runs": [run_of(c, 1.0), run_of(c, 1.02)]}
            for c in space.all_candidates()]
    return Table({"fixture": "tiny", "hardware": fingerprint().to_dict(), "patches": ["sdpa_attention"],
                  "contract_toml": contract_path(repo).read_text(), "timeout_s": 1000.0, "rows": rows})


def test_oracle_is_the_fastest_configuration_that_always_fits(table):
    key, speedup = table.oracle()
    best = table.rows[key].candidate
    assert best.knobs == {"micro_batch_size": 4, "activation_checkpointing": False, "dtype": "float32"}
    assert best.patches == ("sdpa_attention",)
    base = STARTUP + PLANNED * 1.01  # median over the two repeats of step 1.0 and 1.02
    assert speedup == pytest.approx(base / (STARTUP + PLANNED * 0.8 * 0.9 * 1.01))
    oom = Candidate({"micro_batch_size": 8, "activation_checkpointing": False, "dtype": "float32"}, ())
    assert table.job_s(oom.key()) == math.inf and table.speedup(oom.key()) == 1.0


def test_a_slow_trial_is_aborted_and_charged_up_to_the_abort(table):
    slow = Candidate({"micro_batch_size": 2, "activation_checkpointing": False, "dtype": "bfloat16"}, ())
    full = {8.0: run_of(slow, 1.0)["wall_s"], 8.16: run_of(slow, 1.02)["wall_s"]}
    # 8x the bound: the runner's far-slower rule stops it after two steps past the first (two
    # warm-up steps and one measured step seen); the five measured steps left are not paid for.
    far = table.trial(slow, np.random.default_rng(0), abort_step_time=1.0)
    assert far.status is TrialStatus.ABORTED_SLOW and len(far.step_times) == 1
    assert far.wall_s == pytest.approx(full[round(far.step_times[0], 2)] - 5 * far.step_times[0])
    # 2x the bound: only the clearly-slower rule applies, after three measured steps.
    clear = table.trial(slow, np.random.default_rng(0), abort_step_time=4.0)
    assert clear.status is TrialStatus.ABORTED_SLOW and len(clear.step_times) == 3
    assert clear.wall_s == pytest.approx(full[round(clear.step_times[0], 2)] - 3 * clear.step_times[0])
    assert table.trial(slow, np.random.default_rng(0), abort_step_time=None).ok


@pytest.mark.parametrize("method", METHODS)
def test_every_method_replays_and_finds_a_deployable_pick(table, method):
    runs = [replay(table, method, seed, trials=12) for seed in range(2)]
    for records in runs:
        assert 4 <= len(records) <= 12
        assert [r["kind"] for r in records[:2]] == ["baseline", "validation"]
        assert all(r["speedup"] >= 1.0 for r in records)
        assert all(r["status"] in {s.value for s in TrialStatus} for r in records)
    # 12 trials on a 24-configuration space with a 1.4x optimum: every method should do better
    # than the baseline by the end (the baseline is the slowest fp32 configuration).
    assert metrics.curve(runs, 12)["median"][-1] > 1.05


def test_a_bank_given_to_replay_is_read_for_seeds_and_left_as_it_was(table, tmp_path):
    # Another machine's bank whose best is a configuration no replay run of this table would seed.
    other = table.space.with_value(table.space.baseline(), "activation_checkpointing", True)
    bank_url = f"sqlite:///{tmp_path}/bank.db"
    # Closed before the bytes are read: SQLite keeps a write in its -wal file until the last
    # connection checkpoints it into bank.db.
    with ExperienceBank(bank_url) as bank:
        bank.record_run(
            signature=WorkloadSignature.from_contract(table.contract, {}), hardware_id="other-machine",
            hardware="one core", best=[BestConfig(candidate=other, speedup=1.1, interval=(1.02, 1.2))])
    before = (tmp_path / "bank.db").read_bytes(), _dump(tmp_path / "bank.db")
    records = replay(table, "infrarsi+bank", 0, trials=12, bank_url=bank_url)
    assert next(r for r in records if r["kind"] == "search")["key"] == other.key()
    # The file, and what a reader sees (a write still in the -wal file included).
    assert ((tmp_path / "bank.db").read_bytes(), _dump(tmp_path / "bank.db")) == before


def _dump(path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return list(db.iterdump())


def test_metrics_on_hand_made_records():
    run_a = [{"speedup": 1.0, "status": "ok", "wall_s": 10.0}, {"speedup": 1.2, "status": "oom", "wall_s": 5.0},
             {"speedup": 1.5, "status": "aborted_slow", "wall_s": 5.0}]
    run_b = [{"speedup": 1.0, "status": "ok", "wall_s": 20.0}]
    assert metrics.best_so_far(run_b, 3) == [1.0, 1.0, 1.0]
    assert metrics.trials_to(run_a, 0.9 * 1.5) == 3.0
    assert metrics.trials_to(run_b, 1.1) == math.inf
    med, reached = metrics.median_trials_to([run_a, run_a, run_b], 1.2)
    assert (med, reached) == (2.0, pytest.approx(2 / 3))
    w = metrics.waste([run_a, run_b])
    assert w["oom"] == 2.5 and w["aborted_slow"] == 2.5 and w["total_s"] == 20.0
    assert w["share"] == pytest.approx(0.25)
    c = metrics.curve([run_a, run_b], 3)
    assert list(c["median"]) == [1.0, 1.1, 1.25]
    assert "| a | 2 | 2 (3) | 1.250x" in report.summary_table({"a": [run_a, run_b]}, 1.5, 3)


def test_a_bad_run_bank_holds_each_settings_slowest_run_as_one_sure_trial(table):
    from bench.tuners.replay import BAD_RUN_SD, bad_findings

    findings = {f.key: f for f in bad_findings(table)}
    # micro-batch 8 alone never fits: a bad run has no step time for it either.
    assert set(findings) == {"micro_batch_size=4", "activation_checkpointing=True", "dtype=bfloat16",
                             "patch:sdpa_attention"}
    base_fastest = 1.0  # the baseline's two runs: step 1.0 and 1.02
    sdpa = findings["patch:sdpa_attention"]
    assert math.exp(sdpa.time_log) == pytest.approx(0.9 * 1.02 / base_fastest)
    assert (sdpa.n, sdpa.time_sd, sdpa.baseline, sdpa.value) == (1, BAD_RUN_SD, "off", "on")
