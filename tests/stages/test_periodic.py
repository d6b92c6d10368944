"""A loop whose steps carry periodic work, as real loops do (a sample-and-checkpoint callback after
the first iteration, an evaluation every five steps): doctor names the steps that carry it, and the
search compares each step with the baseline's same step, so no trial is aborted for that work."""

from __future__ import annotations

from pathlib import Path

from infrarsi.records import load_doctor
from infrarsi.stages.run import run
from tests.stages.conftest import measured_copy

PERIODIC = Path(__file__).parents[1] / "test_data" / "stages" / "periodic"


def test_periodic_work_is_named_and_never_aborts_a_trial(tmp_path):
    repo = measured_copy(PERIODIC, tmp_path / "periodic")
    findings = load_doctor(repo).findings
    assert any(f.startswith("Step 1 carries 2.") for f in findings), findings
    assert any(f.startswith("Step 6 carries 0.") for f in findings), findings
    result = run(repo, trials=6, use_bank=False, verify=False)
    assert result.status == "searched", result.message
    ran = [t for t in result.trials if t.status != "disturbed"]
    assert len(ran) >= 5 and not [t for t in ran if t.status == "aborted_slow"], \
        [(t.candidate, t.status, t.detail) for t in ran]
