"""A repo's whole state directory, built with the real save functions and a real Optuna study.

The inputs are the hand-written test data in tests/test_data/report/ (see its README): trial
results go through TrialStore.begin/finish like the run stage's, the verdicts come from the real
``judge`` over the stored verification reruns, and run.json is written by ``save_run``.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from infrarsi.contract import Contract, Knob, LossInvariant, MemoryBudget, Scope, Workload, file_sha256, save_contract
from infrarsi.experiment.store import TrialStore, default_storage_url
from infrarsi.noise import PROMOTION_FLOOR
from infrarsi.records import DoctorReport, PatchCheck, RunResult, TrialRow, load_run, save_doctor, save_run
from infrarsi.trials import Candidate, TrialResult
from infrarsi.whole_process import Lengths, Pair, best_promoted, job_seconds, judge

DATA = Path(__file__).parents[1] / "test_data" / "report"
PATCHES = ["zero_grad_set_to_none", "optimizer_foreach"]
MIB = 2**20


def report_contract(repo: Path) -> Contract:
    return Contract(
        workload=Workload(entry="train.py", command=["python", "train.py"], args={"batch_size": 16},
                          tokens_per_step=2048, seq_len=128, global_batch=16, seed=1337,
                          warmup_steps=1, measured_steps=4, planned_steps=1000),
        loss=LossInvariant(compare_steps=5, tolerance=1.9e-5, numerics_tolerance=0.069,
                           reference=[6.9412, 6.8127, 6.6503, 6.4719, 6.2868]),
        memory=MemoryBudget(budget_bytes=512 * MIB),
        scope=Scope(editable=["train.py", "model.py"], locked={"data.py": file_sha256(repo / "data.py")}),
        knobs=[
            Knob(name="max_iters", role="steps", type="int", default=200, flag="--max_iters"),
            Knob(name="micro_batch_size", role="micro_batch", type="int", default=4, flag="--micro_batch_size",
                 domain=[1, 2, 4, 8], tunable=True),
            Knob(name="threads", role="threads", type="int", default=2, flag="--threads", domain=[1, 2], tunable=True),
            Knob(name="dtype", role="dtype", type="str", default="float32", flag="--dtype",
                 domain=["float32", "bfloat16"], tunable=True),
            Knob(name="compile", role="compile", type="bool", default=False, flag="--compile", flag_style="store_true",
                 domain=[False, True], tunable=True),
            Knob(name="attention", role="attention_impl", type="str", default="manual", source="model.py:9",
                 domain=["manual", "sdpa"], tunable=True),
        ],
    )


def _round(result: TrialResult, lengths: Lengths) -> Pair:
    """The test data's verification reruns predate whole-process timing: each is its round's long
    run, and the short one is the same run stopped after its warm-up, both timed as its records say
    (a 0.2 s exit)."""
    steps = [*result.warmup_times, *result.step_times]

    def stopped_after(n: int) -> TrialResult:
        stopped = (result.startup_s or 0.0) + sum(steps[:n])
        return replace(result, stopped_s=stopped, process_s=stopped + 0.2)

    return Pair(short=stopped_after(lengths.short), long=stopped_after(lengths.long))


def build_state(repo: Path) -> RunResult:
    """Write contract, doctor.json, the study and run.json under ``repo/.infrarsi``."""
    contract = report_contract(repo)
    save_contract(contract, repo)
    doctor_data = json.loads((DATA / "doctor.json").read_text())
    doctor_data["contract_hash"] = contract.digest()
    save_doctor(DoctorReport.from_dict(doctor_data), repo)

    storage = default_storage_url(repo)
    store = TrialStore.open(contract, PATCHES, storage_url=storage)
    rows, checks = [], []
    verification: dict[str, list[Pair]] = {}
    lengths = Lengths.of(contract.workload)
    planned = contract.workload.planned_steps
    for entry in json.loads((DATA / "trials.json").read_text()):
        if entry["kind"] == "interrupted":
            store.interrupted(store.begin(Candidate(), "search"), entry["wall_s"])
            continue
        result = TrialResult.from_dict(entry["result"])
        trial = store.begin(result.candidate, entry["kind"])
        store.explain(trial, entry["reason"])
        store.finish(trial, result)
        rows.append(TrialRow(number=trial.number, kind=entry["kind"], status=result.status.value,
                             candidate=result.candidate.to_dict(), step_s=result.step_time,
                             job_s=job_seconds(result, planned), peak_bytes=result.peak_bytes, wall_s=result.wall_s,
                             detail=result.detail[-300:], reason=entry["reason"]))
        if entry["kind"] == "validation":
            name = result.candidate.patches[0]
            checks.append(PatchCheck(name=name, status="validated" if result.ok else result.status.value,
                                     reason=result.detail[-300:], cost_s=result.wall_s))
        if entry["kind"] == "verification":
            verification.setdefault(result.candidate.key(), []).append(_round(result, lengths))

    baseline = store.trials(("baseline",))[0].result
    noise_floor = doctor_data["noise"]["min_speedup"]
    verdicts = [
        judge(runs[0].long.candidate, verification[baseline.candidate.key()], runs, lengths=lengths,
              floor=PROMOTION_FLOOR, compare_steps=contract.loss.compare_steps)
        for key, runs in verification.items() if key != baseline.candidate.key()
    ]
    promoted = best_promoted(verdicts)
    models = json.loads((DATA / "run.json").read_text())
    run = RunResult(
        status="ok" if promoted else "no_promotion",
        message=f"promoted: {promoted.job_speedup[0]:.2f}x faster" if promoted else "no candidate cleared the floor",
        storage_url=storage, study_name=store.study.study_name, baseline=baseline, trials=rows,
        patch_checks=checks, verdicts=verdicts, promoted=promoted, noise_floor=noise_floor,
        spent_s=sum(r.wall_s for r in rows), interrupted_s=store.interrupted_seconds(),
        search_ended="the budget of 12 trials", **models,
    )
    save_run(run, repo)
    return run


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Path:
    """Built once: a real study takes seconds to fill on a busy 2-core machine."""
    repo = tmp_path_factory.mktemp("built") / "gpt"
    shutil.copytree(DATA / "repo", repo)
    build_state(repo)
    return repo


@pytest.fixture
def repo(built: Path, tmp_path: Path) -> Path:
    """A private copy of the built repo, its run pointing at its own copy of the study."""
    repo = tmp_path / "gpt"
    shutil.copytree(built, repo)
    run = load_run(repo)
    run.storage_url = default_storage_url(repo)
    save_run(run, repo)
    return repo


@pytest.fixture
def bare_repo(tmp_path: Path) -> Path:
    """The training repo with no InfraRSI state at all."""
    repo = tmp_path / "bare"
    shutil.copytree(DATA / "repo", repo)
    return repo
