"""A loop whose steps carry periodic work, as real loops do (a sample-and-checkpoint callback after
the first iteration, an evaluation every five steps): doctor names the steps that carry it, and the
search compares each step with the baseline's same step, so no trial is aborted for that work. A
trial is still aborted when its ordinary steps are slower than the best by the bound: no false
aborts, and no missed ones either."""

from __future__ import annotations

import shutil
from pathlib import Path

from infrarsi.experiment.search_loop import ABORT_FACTOR
from infrarsi.records import load_doctor
from infrarsi.stages.run import run
from tests.stages.conftest import measured_copy

PERIODIC = Path(__file__).parents[1] / "test_data" / "stages" / "periodic"


def step_s(knobs: dict) -> float:
    """train.py's ordinary step for these settings (its own formula, its defaults)."""
    step = 0.010 + 0.012 * (16 // knobs.get("micro_batch_size", 2))
    return step * (1.0 if knobs.get("threads", 1) >= 2 else 1.3)


def test_periodic_work_is_named_and_never_aborts_a_trial(tmp_path):
    repo = measured_copy(PERIODIC, tmp_path / "periodic")
    findings = load_doctor(repo).findings
    assert any(f.startswith("Step 1 carries 2.") for f in findings), findings
    assert any(f.startswith("Step 6 carries 0.") for f in findings), findings
    result = run(repo, trials=6, use_bank=False, verify=False)
    assert result.status == "searched", result.message
    ran = [t for t in result.trials if t.kind == "search" and t.status != "disturbed"]
    ok = [t for t in ran if t.status == "ok"]
    # Every step after the first carries 2 s in this loop's step 1: compared as they are, the
    # median of the first two would abort every search trial (the bound is a fraction of a second).
    assert len(ok) >= 2, [(t.candidate, t.status, t.detail) for t in ran]
    best = min(step_s(t.candidate["knobs"]) for t in ok)
    for t in ran:
        if t.status == "aborted_slow":
            assert step_s(t.candidate["knobs"]) > ABORT_FACTOR * best, (t.candidate, t.detail)
            assert "each against the baseline's step of the same index" in t.detail


def test_a_loop_shorter_than_its_planned_steps_is_verified_at_the_contracts_length(tmp_path):
    """Its data runs out after 20 steps whatever the step knob says: doctor's run at the longer
    length it chose for verification ends early, so verification keeps the contract's 13 steps and
    doctor says why."""
    repo = tmp_path / "short_loop"
    shutil.copytree(PERIODIC, repo)
    train = repo / "train.py"
    train.write_text(train.read_text().replace("for it in range(args.max_iters):", "for it in range(min(args.max_iters, 20)):"))
    repo = measured_copy(repo, tmp_path / "copy")
    report = load_doctor(repo)
    assert report.verification_steps == [3, 13], report.verification_steps
    assert any("did not run the" in w and "verification runs the contract's 13" in w for w in report.warnings), \
        report.warnings
