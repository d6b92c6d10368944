"""The trial store over real Optuna storage (SQLite files and a journal file)."""

from __future__ import annotations

import math

import pytest
from optuna.trial import TrialState

from infrarsi.contract import Contract, Knob, LossInvariant, MemoryBudget, Scope, Workload
from infrarsi.experiment.store import INTERRUPTED_ATTR, TrialStore, study_name
from infrarsi.settings import PATCH_PREFIX
from infrarsi.study_codec import distributions, from_params, to_params
from infrarsi.trials import Candidate, Hunk, TrialResult, TrialStatus
from infrarsi.whole_process import job_seconds

PATCHES = ["fused_adamw", "sdpa_attention"]
PLANNED = 1000


def contract(**workload) -> Contract:
    return Contract(
        workload=Workload(entry="train.py", command=["python", "train.py"], tokens_per_step=128, seq_len=8,
                          global_batch=16, seed=1, warmup_steps=2, measured_steps=5, planned_steps=PLANNED,
                          **workload),
        loss=LossInvariant(compare_steps=7, tolerance=1e-4, numerics_tolerance=0.05),
        memory=MemoryBudget(budget_bytes=2**27),
        scope=Scope(editable=["train.py"], locked={"data.py": "0" * 64}),
        knobs=[
            Knob(name="micro_batch_size", role="micro_batch", type="int", default=2, flag="--micro_batch_size",
                 domain=[1, 2, 4, 8, 16], tunable=True),
            Knob(name="activation_checkpointing", role="activation_checkpointing", type="bool", default=False,
                 flag="--activation_checkpointing", flag_style="store_true", domain=[False, True], tunable=True),
            Knob(name="optimizer_impl", role="optimizer_impl", type="str", default="for-loop", flag="--optimizer_impl",
                 domain=["for-loop", "foreach"], tunable=True),
            Knob(name="max_iters", role="steps", type="int", default=100, flag="--max_iters"),
        ],
    )


def url(tmp_path, name="study.db") -> str:
    return f"sqlite:///{tmp_path / name}"


def result(candidate: Candidate, status=TrialStatus.OK, step=0.05, **fields) -> TrialResult:
    ok = status in (TrialStatus.OK, TrialStatus.ABORTED_SLOW)
    return TrialResult(status=status, candidate=candidate, step_times=[step, step * 1.01, step * 0.99] if ok else [],
                       warmup_times=[0.2] if ok else [], losses=[4.0, 3.8, 3.6] if ok else [],
                       tokens_per_step=128 if ok else None, peak_bytes=60 * 2**20 if ok else 140 * 2**20,
                       startup_s=0.5 if ok else None, wall_s=1.25, phases={"forward": step / 2} if ok else {},
                       detail="" if ok else "tree RSS above the budget", **fields)


BIG = Candidate(knobs={"micro_batch_size": 16, "activation_checkpointing": True, "optimizer_impl": "foreach"},
                patches=("fused_adamw",))


def test_params_round_trip_a_candidate_and_fill_defaults():
    c = contract()
    params = to_params(BIG, c, PATCHES)
    assert params == {"micro_batch_size": 16, "activation_checkpointing": True, "optimizer_impl": "foreach",
                      PATCH_PREFIX + "fused_adamw": True, PATCH_PREFIX + "sdpa_attention": False}
    assert from_params(params) == BIG
    # A knob the candidate leaves out is at its default; untunable knobs are not params.
    assert from_params(to_params(Candidate(knobs={"micro_batch_size": 4}), c, [])) == Candidate(
        knobs={"micro_batch_size": 4, "activation_checkpointing": False, "optimizer_impl": "for-loop"})
    assert set(distributions(c, PATCHES)) == set(params)


def test_a_finished_trial_survives_reopening_the_storage(tmp_path):
    c = contract()
    store = TrialStore.open(c, PATCHES, storage_url=url(tmp_path))
    trial = store.begin(BIG, "search")
    assert store.candidate_of(trial) == BIG  # the given candidate, not the sampler's
    measured = result(BIG, hunks=[Hunk(path="train.py", header="@@ -3,1 +3,1 @@", text="-a\n+b\n")],
                      model_facts={"params": 1000})
    store.finish(trial, measured)

    again = TrialStore.open(c, PATCHES, storage_url=url(tmp_path))  # a new process, the same file
    assert again.study.study_name == store.study.study_name == study_name(c)
    (stored,) = again.trials()
    assert (stored.number, stored.kind) == (0, "search")
    assert stored.result == measured and stored.result.to_dict() == measured.to_dict()
    frozen = again.study.trials[0]
    assert frozen.state == TrialState.COMPLETE and frozen.value == pytest.approx(job_seconds(measured, PLANNED))
    assert again.history() == [measured]


def test_each_status_lands_in_the_study_state_it_means(tmp_path):
    store = TrialStore.open(contract(), [], storage_url=url(tmp_path))
    cases = [(TrialStatus.OK, TrialState.COMPLETE), (TrialStatus.ABORTED_SLOW, TrialState.PRUNED),
             (TrialStatus.OOM, TrialState.FAIL), (TrialStatus.CRASH, TrialState.FAIL),
             (TrialStatus.TIMEOUT, TrialState.FAIL), (TrialStatus.NUMERICS, TrialState.FAIL)]
    for i, (status, _state) in enumerate(cases):
        cand = Candidate(knobs={"micro_batch_size": [1, 2, 4, 8, 16, 16][i], "activation_checkpointing": i == 5,
                                "optimizer_impl": "foreach"})
        trial = store.begin(cand, ["baseline", "search", "search", "validation", "search", "verification"][i])
        store.finish(trial, result(cand, status))
    assert [t.state for t in store.study.trials] == [state for _status, state in cases]
    assert [s.result.status for s in store.trials()] == [status for status, _state in cases]
    assert [s.kind for s in store.trials(("search",))] == ["search"] * 3
    assert [s.number for s in store.trials(("baseline", "verification"))] == [0, 5]


def test_an_interrupted_trial_is_failed_with_its_cost_and_no_result(tmp_path):
    store = TrialStore.open(contract(), [], storage_url=url(tmp_path))
    done = store.begin(BIG, "search")
    store.finish(done, result(BIG))
    cut = store.begin(Candidate(knobs={"micro_batch_size": 8}), "search")
    store.interrupted(cut, 2.5)
    cut2 = store.begin(Candidate(knobs={"micro_batch_size": 4}), "verification")
    store.interrupted(cut2, 0.75)
    assert store.interrupted_seconds() == pytest.approx(3.25)
    frozen = store.study.trials
    assert [t.state for t in frozen] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.FAIL]
    assert frozen[1].user_attrs[INTERRUPTED_ATTR] == 2.5
    # An interruption is no verdict on the candidate: it is not among the measured trials.
    assert [s.number for s in store.trials()] == [0]


def test_the_study_is_one_per_workload(tmp_path):
    c = contract()
    refined = c.with_reference([4.0, 3.9], tolerance=1e-3, numerics_tolerance=0.1)
    assert study_name(refined) == study_name(c)  # doctor's refinement keeps the study
    assert study_name(contract(args={"max_iters": 7})) != study_name(c)
    a = TrialStore.open(c, [], storage_url=url(tmp_path))
    a.finish(a.begin(BIG, "search"), result(BIG))
    other = TrialStore.open(contract(args={"max_iters": 7}), [], storage_url=url(tmp_path))
    assert other.trials() == [] and len(a.trials()) == 1


def test_a_journal_file_works_as_storage(tmp_path):
    journal = f"journal:{tmp_path / 'study.log'}"
    store = TrialStore.open(contract(), PATCHES, storage_url=journal)
    store.finish(store.begin(BIG, "search"), result(BIG, step=0.02))
    (stored,) = TrialStore.open(contract(), PATCHES, storage_url=journal).trials()
    assert stored.result.candidate == BIG and math.isclose(stored.result.step_time, 0.02)
