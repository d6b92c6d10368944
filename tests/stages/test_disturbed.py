"""A busy machine is not blamed on the candidate (issue 20).

One real `run` on the spinning stand-in (tests/test_data/stages/spinning: the paced job with its
steps spent on the CPU, so a hog slows it): right after its baseline trial, a CPU hog (two busy-loop processes
pinned to each core the job may use) starts; it is stopped when the run reports the next trial
disturbed. That trial must be recorded ``disturbed`` (its cost counted), rerun without the hog and
then ``ok``, never told to Optuna or the time model as slow, and the experience bank must hold
nothing of it. Two more runs keep the hog to the end: the run measures the machine's normal again
and, told that no slowdown is measured on, stops without promoting; told to measure on, it judges the
rest against the new normal. And doctor: a hog that starts once its baseline runs have measured the
normal disturbs the next run, which doctor reruns.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from optuna.trial import TrialState

from infrarsi.bank import ExperienceBank
from infrarsi.contract import load_contract
from infrarsi.events import Event
from infrarsi.experiment import quiet
from infrarsi.experiment.store import TrialStore, default_storage_url
from infrarsi.records import Renormalization, RerunRow
from infrarsi.records.files import doctor_logs_dir
from infrarsi.report.disturbance import words as disturbance_words
from infrarsi.runner.interference import job_cores
from infrarsi.search.space import SearchSpace
from infrarsi.search.time_model import time_data
from infrarsi.stages.doctor import doctor
from infrarsi.stages.init import init
from infrarsi.stages.run import run
from infrarsi.trials import TrialStatus
from tests.stages.conftest import BUDGET_BYTES, git_repo, measured_copy
from tests.support.hog import CpuHogs

pytestmark = pytest.mark.e2e


SPINNING = Path(__file__).parents[1] / "test_data" / "stages" / "spinning"


@pytest.fixture(scope="module")
def hogged_run(tmp_path_factory):
    repo = measured_copy(SPINNING, tmp_path_factory.mktemp("hogged") / "spinning")
    url = f"sqlite:///{tmp_path_factory.mktemp('bank')}/bank.db"
    # Two per core: on a machine other work already saturates, one more process per core barely
    # changes the job's share (and doctor's normal already holds that work).
    hogs = CpuHogs(job_cores(), per_core=2)
    events: list[Event] = []

    def control(event: Event) -> None:
        events.append(event)
        if event.stage != "run" or event.kind != "report":
            return
        if event.data["kind"] == "baseline" and not hogs.running and not events_disturbed(events):
            hogs.start()
        elif event.data["status"] == "disturbed":
            hogs.stop()

    with hogs:
        result = run(repo, trials=3, bank_url=url, on_event=control)
    return repo, url, result


def run_with_lasting_hog(root: Path, max_slowdown: float):
    """A run of two search trials with a hog that starts after the baseline and stays to the end,
    measured on up to ``max_slowdown`` (``quiet.MAX_SLOWDOWN``)."""
    repo = measured_copy(SPINNING, root / "spinning")
    hogs = CpuHogs(job_cores(), per_core=2)

    def control(event: Event) -> None:
        if event.stage == "run" and event.kind == "report" and event.data["kind"] == "baseline" and not hogs.running:
            hogs.start()

    with hogs, pytest.MonkeyPatch.context() as patch:
        patch.setattr(quiet, "MAX_SLOWDOWN", max_slowdown)
        return run(repo, trials=2, verify=False, on_event=control)


@pytest.fixture(scope="module")
def lasting_hog_run(tmp_path_factory):
    """Whatever the slowdown, the run ends. (How much this hog slows the paced job depends on how
    the kernel shares the cores with it, 1.0-1.6x here: the test holds the rule, not the limit.)"""
    return run_with_lasting_hog(tmp_path_factory.mktemp("lasting"), 0.5)


@pytest.fixture(scope="module")
def tolerated_hog_run(tmp_path_factory):
    """The run measures on under the hog."""
    return run_with_lasting_hog(tmp_path_factory.mktemp("tolerated"), 100.0)


def events_disturbed(events: list[Event]) -> bool:
    return any(e.data.get("status") == "disturbed" for e in events)


def test_the_hogged_trial_is_disturbed_and_its_rerun_without_the_hog_is_ok(hogged_run):
    _, _, result = hogged_run
    assert result.status in ("ok", "no_promotion"), result.message
    rows = {r.number: r for r in result.trials}
    disturbed = [r for r in result.trials if r.status == "disturbed"]
    # The hog runs from the baseline's report to the first disturbed trial. A machine shared with
    # other work (CI's is) may disturb a later trial on its own: that one is handled the same way.
    assert disturbed, [(r.number, r.kind, r.status, r.detail) for r in result.trials]
    hit = disturbed[0]
    assert hit.number == min(n for n, r in rows.items() if r.kind != "baseline"), rows
    assert "other processes used" in hit.detail and hit.load_cores is not None and hit.load_cores > 0.5
    rerun = [r for r in result.trials if r.rerun_of == hit.number]
    assert rerun and rerun[0].candidate == hit.candidate, rows
    assert rerun[0].status == "ok" or rerun[0].status == "disturbed" and len(disturbed) > 1, rows
    # Its cost counts, and the run says what was disturbed and rerun.
    d = result.disturbance
    assert d is not None and d.trials == len(disturbed) and d.share > 0
    assert d.seconds == pytest.approx(sum(r.wall_s for r in disturbed))
    assert RerunRow(trial=rerun[0].number, of=hit.number, kind=hit.kind, candidate=hit.candidate,
                    status=rerun[0].status, of_detail=hit.detail) in d.reruns
    assert len(d.reruns) == len(disturbed) - len(d.unresolved)
    assert sum(r.wall_s for r in disturbed) <= result.spent_s


def test_the_models_never_saw_the_disturbed_trial_as_slow(hogged_run):
    repo, _, result = hogged_run
    contract = load_contract(repo)
    store = TrialStore.open(contract, [], storage_url=default_storage_url(repo))
    disturbed = [r.number for r in result.trials if r.status == "disturbed"]
    # What Optuna's own samplers read: the study as stored.
    frozen_by_number = {t.number: t for t in store.study.get_trials(deepcopy=False)}
    for number in disturbed:
        frozen = frozen_by_number[number]
        # Not PRUNED (Optuna's "slow"), no objective value.
        assert frozen.state is TrialState.FAIL and frozen.value is None
    history = store.history()
    stored = {s.number: s.result for s in store.trials() if s.result.status is TrialStatus.DISTURBED}
    assert sorted(stored) == disturbed
    hit = stored[disturbed[0]]
    assert hit.interference["disturbed"]
    # Never stopped as slow on its disturbed steps: it ran every step of the contract.
    assert len(hit.interference["steps"]) == contract.workload.total_steps
    assert "aborted_slow" not in hit.detail
    # The time model's rows (what the search and the prior checks learn from) leave it out.
    space = SearchSpace.from_contract(contract, [])
    with_it = time_data(space, history)
    without = time_data(space, [t for t in history if t.status is not TrialStatus.DISTURBED])
    assert with_it.y.tolist() == without.y.tolist()


def test_the_bank_holds_no_disturbed_finding(hogged_run):
    repo, url, result = hogged_run
    contract = load_contract(repo)
    store = TrialStore.open(contract, [], storage_url=default_storage_url(repo))
    history = store.history()
    space = SearchSpace.from_contract(contract, [])
    counted = dict(zip(space.setting_keys, time_data(space, history).indicator.sum(axis=0).tolist(), strict=True))
    # Had the disturbed trials been taken as measurements, their settings would count more.
    as_if = [dataclasses.replace(t, status=TrialStatus.OK) if t.status is TrialStatus.DISTURBED else t
             for t in history]
    would = dict(zip(space.setting_keys, time_data(space, as_if).indicator.sum(axis=0).tolist(), strict=True))
    with ExperienceBank(url) as bank:
        runs = bank.runs()
    assert len(runs) == 1 and runs[0].effects
    for effect in runs[0].effects:
        assert effect.n == counted[effect.key], (effect, counted)
    assert any(would[e.key] > e.n for e in runs[0].effects), (would, counted)
    assert all(verdict != "disturbed" for _, verdict in runs[0].verdicts)


def remeasured_normal(result) -> tuple[str, object, Renormalization, object]:
    """Every trial in words (for failure messages: a string is shown whole), the trial first
    disturbed, its rerun (disturbed too), the re-measure and its trial row."""
    rows = "\n".join(str((r.number, r.kind, r.status, r.reason, r.detail)) for r in result.trials)
    first = next(r for r in result.trials if r.status == "disturbed")
    [rerun] = [r for r in result.trials if r.rerun_of == first.number]
    assert len(result.disturbance.renormalized) == 1, f"{result.disturbance}\n{rows}"
    [again] = result.disturbance.renormalized
    assert rerun.status == "disturbed" and again.after_trial == rerun.number and again.background is not None, rows
    assert again.background.normal_cores > 0.5 and again.background.limit_cores > 0.8
    remeasured = next(r for r in result.trials if r.number == again.trial)
    # The baseline under the new normal, judged against the old one: disturbed, no measurement.
    assert remeasured.kind == quiet.NORMAL and remeasured.status == "disturbed", rows
    return rows, rerun, again, remeasured


def test_a_disturbance_that_stays_far_slower_ends_the_run_without_promoting(lasting_hog_run):
    result = lasting_hog_run
    rows, rerun, again, remeasured = remeasured_normal(result)
    assert again.stopped and again.slowdown >= 1.0
    assert result.status == "no_promotion" and "stopped without promoting" in result.message, result.message
    assert "stayed busy from trial" in result.search_ended and result.promoted is None
    # Nothing ran after the re-measure; the rerun that stayed disturbed is said to be unresolved.
    assert max(r.number for r in result.trials) == remeasured.number, rows
    assert result.disturbance.unresolved == (rerun.number,)
    assert any("the run stopped there" in line for line in disturbance_words(result.disturbance))


def test_a_disturbance_that_stays_becomes_the_normal_the_rest_is_judged_by(tolerated_hog_run):
    result = tolerated_hog_run
    rows, rerun, again, remeasured = remeasured_normal(result)
    assert not again.stopped and again.slowdown >= 1.0
    first = next(r for r in result.trials if r.status == "disturbed")
    [last] = [r for r in result.trials if r.rerun_of == rerun.number]
    assert last.number > remeasured.number and last.status == "ok" and last.candidate == first.candidate, rows
    assert result.disturbance.unresolved == () and any("measured again" in line for line in disturbance_words(result.disturbance))


def test_doctor_reruns_a_run_after_the_baseline_runs_that_others_disturbed(tmp_path, monkeypatch):
    repo = tmp_path / "spinning"
    shutil.copytree(SPINNING, repo, ignore=shutil.ignore_patterns("__pycache__", ".infrarsi"))
    git_repo(repo)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert init(repo, budget_bytes=BUDGET_BYTES).ok
    hogs = CpuHogs(job_cores(), per_core=2)
    events: list[Event] = []

    def control(event: Event) -> None:
        events.append(event)
        if event.stage != "doctor":
            return
        if " disturbed, rerun: " in event.message:
            hogs.stop()
        elif event.message.endswith("(verification's reference)") and not hogs.running and not reruns(events):
            hogs.start()  # the baseline runs measured the normal without it: the run that follows is judged

    with hogs:
        done = doctor(repo, repeats=2, on_event=control)
    assert done.ok and done.report is not None, done.message
    report = done.report
    said = reruns(events)
    # The run the hog started with (the short length's checksum run) is the one rerun.
    short = report.verification_steps[0]
    assert said and said[0].startswith(f"the baseline for {short} steps disturbed, rerun: ") \
        and "measured steps disturbed" in said[0], [e.message for e in events if e.stage == "doctor"]
    assert (doctor_logs_dir(repo) / f"baseline-{short}-steps-rerun1" / "output.log").exists()
    # The normal is the baseline runs', measured before the hog; the hogged length still counts.
    assert report.background is not None and report.background.normal_cores < 1.0, report.background
    assert len(report.verification_steps) == 2 and not any("did not run" in w for w in report.warnings)


def reruns(events: list[Event]) -> list[str]:
    """What doctor said of each rerun of a disturbed run."""
    return [e.message for e in events if e.stage == "doctor" and " disturbed, rerun: " in e.message]
