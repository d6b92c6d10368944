"""The report's numbers against the state they were gathered from."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from infrarsi.contract import load_contract
from infrarsi.datasheet import datasheet_peak
from infrarsi.records import DoctorReport, load_run
from infrarsi.report import tables
from infrarsi.report.model import INTERRUPTED, candidate_peak, reproduce_command
from infrarsi.stages.report import report
from infrarsi.trials import Candidate

DATA = Path(__file__).parents[1] / "test_data" / "report"


def test_baseline_and_promoted_come_from_the_same_interleaved_reruns(repo):
    r = report(repo, formats=()).report
    verdict = load_run(repo).promoted
    assert verdict is not None and r.job_speedup == verdict.job_speedup
    assert r.baseline.step_s == pytest.approx(statistics.median(verdict.base_step_s))
    assert r.promoted.step_s == pytest.approx(statistics.median(verdict.cand_step_s))
    assert r.promoted.tokens_per_s == pytest.approx(2048 / r.promoted.step_s)
    # FLOPs per token are fixed by the contract: MFU scales with the step time alone.
    doctor = json.loads((repo / ".infrarsi" / "doctor.json").read_text())["efficiency"]
    peak = doctor["peak"]["value"]
    assert r.baseline.mfu == pytest.approx(r.baseline.tokens_per_s * doctor["flops_per_token"] / peak)
    assert r.promoted.mfu == pytest.approx(r.baseline.mfu * r.baseline.step_s / r.promoted.step_s)
    assert r.promoted.peak_bytes == verdict.peak_bytes
    assert r.baseline.runs == r.promoted.runs == 3


def test_every_status_with_its_cost_and_the_failure_total(repo):
    r = report(repo, formats=())
    trials = [t["result"] for t in json.loads((DATA / "trials.json").read_text()) if t["kind"] != "interrupted"]
    interrupted = sum(t["wall_s"] for t in json.loads((DATA / "trials.json").read_text()) if t["kind"] == "interrupted")
    table = {row[0]: row for row in tables.statuses(r.report).rows}
    for status in ("ok", "oom", "timeout", "aborted_slow", "crash", "numerics", "contract"):
        mine = [t for t in trials if t["status"] == status]
        assert table[status][1] == str(len(mine))
        assert float(table[status][2]) == pytest.approx(sum(t["wall_s"] for t in mine), abs=0.05)
    failed = sum(t["wall_s"] for t in trials if t["status"] != "ok") + interrupted
    assert r.report.failed_s == pytest.approx(failed)
    assert float(table["all failures"][2]) == pytest.approx(failed, abs=0.05)
    assert float(table[INTERRUPTED][2]) == pytest.approx(interrupted)


def test_the_reproduce_command_renders_knob_flags(repo):
    r = report(repo, formats=()).report
    audit = r.promoted_audit
    # The step count every trial told the job (the owner's 1000 planned steps), not the knob's default of 200.
    assert audit.command == "python train.py --batch_size=16 --max_iters=1000 --micro_batch_size=8"
    assert audit.patches == ["zero_grad_set_to_none"] and audit.source_settings == {}
    contract = load_contract(repo)
    knobs = {**contract.defaults(), "compile": True, "threads": 1, "attention": "sdpa"}
    command = reproduce_command(Candidate(knobs=knobs), contract)
    assert command.split()[-2:] == contract.knob("threads").render(1) + contract.knob("compile").render(True)
    assert "--compile" in command and "attention" not in command  # no flag: it is written into the source
    assert "--compile" not in reproduce_command(Candidate(knobs={**knobs, "compile": False}), contract)


def test_each_verified_candidate_shows_the_hunks_it_ran_with(repo):
    r = report(repo, formats=()).report
    by_setting = {a.setting: a for a in r.audits}
    promoted = by_setting["micro_batch_size=8, +zero_grad_set_to_none"]
    assert promoted.promoted and promoted.paths == ["train.py"]
    assert "+    optimizer.zero_grad(set_to_none=True)" in promoted.hunks[0].text
    other = by_setting["attention=sdpa, micro_batch_size=8"]
    assert other.paths == ["model.py"]
    assert other.source_settings == {"attention": "sdpa"}
    assert '+ATTENTION = "sdpa"' in other.hunks[0].text


def test_a_miscalibrated_prior_is_marked(repo):
    rows = tables.priors(report(repo, formats=()).report).rows
    marked = {row[0] for row in rows if tables.MISCALIBRATED in row}
    assert marked == {"dtype=bfloat16"}


def test_a_missing_study_is_a_caveat_not_a_failure(repo):
    (repo / ".infrarsi" / "study.db").unlink()
    r = report(repo, formats=()).report
    assert any("could not be opened" in note for note in r.notes)
    assert all(a.hunks == [] and a.trial is None for a in r.audits)
    assert not (repo / ".infrarsi" / "study.db").exists()


def test_a_candidate_in_another_precision_is_held_to_that_precision_s_datasheet_peak(repo):
    contract = load_contract(repo)
    data = json.loads((DATA / "doctor.json").read_text())
    data["hardware"] = {**data["hardware"], "gpu_name": "NVIDIA H200", "gpu_count": 1}
    data["efficiency"]["peak"] = datasheet_peak("NVIDIA H200", "fp32").to_dict()
    gpu = DoctorReport.from_dict(data)
    assert candidate_peak(Candidate(knobs={"dtype": "bfloat16"}), contract, gpu).value == 989.5e12
    assert candidate_peak(Candidate(knobs={"micro_batch_size": 8}), contract, gpu).dtype == "fp32"
    assert candidate_peak(Candidate(patches=("tf32_matmul",)), contract, gpu).value == 494.5e12
    # A measured (CPU) peak is reused as it is: the report measures nothing in another precision.
    cpu = DoctorReport.from_dict(json.loads((DATA / "doctor.json").read_text()))
    assert candidate_peak(Candidate(knobs={"dtype": "bfloat16"}), contract, cpu) == cpu.efficiency.peak
