"""The run's record built once from the engine's values (experiment/run_record.py), and the values
that are stored as JSON written as they always were: the disturbance in run.json, the conclusion a
winning worker leaves on its claim."""

from __future__ import annotations

import json

from infrarsi.background import Background
from infrarsi.experiment import quiet
from infrarsi.experiment.concluded import Conclusion
from infrarsi.experiment.run_record import RunStart, run_record
from infrarsi.experiment.search_loop import SearchOutcome
from infrarsi.experiment.shared_round import SharedRound
from infrarsi.experiment.store import TrialStore
from infrarsi.experiment.summary import RunSummary
from infrarsi.records import Disturbance, PatchCheck, RunResult, RunStatus, Verdict
from infrarsi.trials import Candidate
from tests.experiment.test_store import contract, url

BACKGROUND = {"cores": 2, "idle_cores": 0.1, "normal_cores": 0.2, "limit_cores": 0.5, "normal_denied": 0.0,
              "limit_denied": 0.2, "busy": False, "waited_s": 0.0}
STORED_DISTURBANCE = {
    "trials": 3, "of_trials": 9, "seconds": 6.5, "share": 0.25,
    "reruns": [{"trial": 5, "of": 4, "kind": "search", "candidate": {"knobs": {"threads": 2}, "patches": []},
                "status": "disturbed", "of_detail": "other processes used 1.20 of the job's cores"}],
    "waited_s": 12.0, "background": BACKGROUND, "max_reruns": 2,
    "renormalized": [{"after_trial": 5, "trial": 6, "stopped": False, "failed": "crash: exit code 1"},
                     {"after_trial": 7, "trial": 8, "stopped": True, "background": {**BACKGROUND, "normal_cores": 1.4},
                      "slowdown": 1.62}],
    "unresolved": [7],
}


def test_the_disturbance_reads_and_writes_run_json_as_it_was():
    text = json.dumps(STORED_DISTURBANCE, indent=2)
    assert json.dumps(Disturbance.from_dict(json.loads(text)).to_dict(), indent=2) == text


PROMOTED = Verdict(candidate=Candidate(knobs={"micro_batch_size": 8}), promoted=True, reason="clears the floor",
                   job_speedup=(1.2, 1.1, 1.3))


def test_a_claim_s_conclusion_reads_and_writes_as_it_was():
    stored = {"status": "ok", "message": "promoted: 1.20x faster (95% CI low 1.10x)",
              "verdicts": [PROMOTED.to_dict()], "promoted": PROMOTED.to_dict()}
    assert Conclusion.from_dict(stored).to_dict() == stored
    assert Conclusion.from_dict(stored).promoted == PROMOTED


def test_a_run_cut_short_before_its_baseline_records_what_it_had():
    start = RunStart(run_id="20270101-000000-beef", started="2027-01-01T00:00:00", sampler="infrarsi",
                     storage_url="sqlite:///study.db", study_name="infrarsi-abc", sandbox="bubblewrap",
                     noise_floor=1.04, priors_source="built-in",
                     skipped=(PatchCheck(name="compile", status="skipped", reason="no GPU", cost_s=0.0),))
    summary = RunSummary(trials=(), spent_s=0, interrupted_s=0.0, prior_checks=(), bank_priors=(), memory_prices=(),
                         disturbance=quiet.summary([], 0, 0.0, Background.from_dict(BACKGROUND), []))
    interrupted = Conclusion(RunStatus.INTERRUPTED, "interrupted")
    result = run_record(start, SearchOutcome(), interrupted, summary)
    assert (result.status, result.message, result.baseline, result.search_ended) == \
        (RunStatus.INTERRUPTED, "interrupted", None, "")
    assert [c.name for c in result.patch_checks] == ["compile"] and result.noise_floor == 1.04
    assert RunResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_a_run_that_ended_before_its_first_trial_has_no_disturbance_and_writes_it_empty():
    error = RunResult(status=RunStatus.ERROR, message="no doctor.json")
    assert error.to_dict()["disturbance"] == {}
    assert RunResult.from_dict(error.to_dict()).disturbance is None


def test_the_worker_that_lost_the_round_reads_the_winner_s_conclusion_from_its_claim(tmp_path):
    store = TrialStore.open(contract(), [], storage_url=url(tmp_path))
    winner, loser = SharedRound(store), SharedRound(store)
    concluded = Conclusion(RunStatus.OK, "promoted: 1.20x faster (95% CI low 1.10x)", (PROMOTED,), PROMOTED)
    assert winner.conclude(lambda: concluded, wait_limit_s=0) == (concluded, None)

    def again() -> Conclusion:
        raise AssertionError("the round was verified twice")

    assert loser.conclude(again, wait_limit_s=0) == (concluded, 0)
