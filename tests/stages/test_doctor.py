"""doctor on a real small GPT (fixtures/dense_gpt), and the report's arithmetic on given runs."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from infrarsi.cli import main
from infrarsi.cli.doctor import render
from infrarsi.contract import (
    Contract,
    Knob,
    LossInvariant,
    MemoryBudget,
    Scope,
    Workload,
    file_sha256,
    load_contract,
    save_contract,
)
from infrarsi.hardware import fingerprint
from infrarsi.records import DoctorError, PeakFlops, load_doctor
from infrarsi.records.doctor import Efficiency
from infrarsi.stages.doctor_contract import with_evaluations_measured, with_measured_workload
from infrarsi.stages.doctor_findings import precision_headroom
from infrarsi.stages.doctor_summary import PHASE_TOLERANCE, summarize
from infrarsi.trials import Candidate, TrialResult, TrialStatus

FIXTURE = Path(__file__).parents[2] / "fixtures" / "dense_gpt"
GIB = 2**30
# A tiny configuration of the fixture so that a run takes seconds: 8 sequences of 64 tokens.
SMALL = {"n_layer": 2, "n_head": 4, "n_embd": 64, "vocab_size": 256, "block_size": 64, "batch_size": 8}


def dense_gpt_contract(repo: Path, *, warmup: int = 1, measured: int = 4) -> Contract:
    return Contract(
        workload=Workload(
            entry="train.py", command=["python", "train.py"], args=dict(SMALL),
            tokens_per_step=8 * 64, seq_len=64, global_batch=8, seed=1337,
            warmup_steps=warmup, measured_steps=measured, planned_steps=1000,
        ),
        loss=LossInvariant(compare_steps=warmup + measured, tolerance=0.0, numerics_tolerance=0.0),
        memory=MemoryBudget(budget_bytes=4 * GIB),
        scope=Scope(editable=["model.py"],
                    locked={p: file_sha256(repo / p) for p in ("train.py", "data.py")}),
        knobs=[
            Knob(name="max_iters", role="steps", type="int", default=200, flag="--max_iters"),
            Knob(name="batch_size", role="workload", type="int", default=8, flag="--batch_size"),
            Knob(name="micro_batch_size", role="micro_batch", type="int", default=4, flag="--micro_batch_size",
                 domain=[1, 2, 4, 8], tunable=True),
            Knob(name="threads", role="threads", type="int", default=0, flag="--threads", domain=[1, 2],
                 tunable=True),
            Knob(name="dtype", role="dtype", type="str", default="float32", flag="--dtype"),
        ],
    )


@pytest.fixture
def dense_gpt(tmp_path, monkeypatch):
    monkeypatch.setenv("INFRARSI_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "dense_gpt"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("__pycache__", ".infrarsi"))
    save_contract(dense_gpt_contract(repo), repo)
    return repo


@pytest.mark.e2e
def test_doctor_measures_the_dense_gpt_baseline_and_says_where_the_time_goes(dense_gpt, capsys, monkeypatch):
    monkeypatch.chdir(dense_gpt)  # as users run it: `infrarsi doctor .`
    assert main(["doctor", ".", "--repeats", "2", "--json"]) == 0
    report = load_doctor(dense_gpt)
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(report.to_dict()))
    render(report, dense_gpt)
    printed = capsys.readouterr().out
    for words in ("Where the time goes", "forward", "backward", "MFU", "peak memory", "noise floor", "background"):
        assert words in printed, (words, printed)

    # The first run is the contract's length; the last verification's long one (issue 49).
    assert report.repeats == 2 and len(report.runs[0].step_times) == 4
    assert len(report.runs[-1].step_times) == report.verification_steps[1] - 1
    # Noise: two runs give a run-to-run CV and a floor no lower than the documented minimum.
    assert report.noise.runs == 2 and report.noise.min_speedup >= 1.01
    assert 0 < report.noise.step_s < 5
    # Phases: the fixture times data, forward, backward and optimizer; they must explain the step.
    assert set(report.phases.phases) == {"data", "forward", "backward", "optimizer"}
    assert abs(1 - report.phases.coverage) <= PHASE_TOLERANCE and report.phases.covered
    # Memory: the watchdog's peak RSS of a torch process is hundreds of MB, under the budget.
    assert 100e6 < report.memory.peak_bytes < report.memory.budget_bytes
    # MFU: FLOPs counted by the launcher's FlopCounterMode on the warm-up step, against the measured
    # fp32 matmul peak; 6N + 12LHQT from the probe's model facts agrees with the count.
    eff = report.efficiency
    assert eff.peak.method == "measured" and eff.peak.dtype == "fp32" and eff.peak.value > 1e9
    assert 0 < eff.mfu < 1.5 and eff.mfu_source == "FlopCounterMode"
    assert 0.7 < eff.flops_per_step / eff.flops_per_step_6n < 1.3
    assert eff.samples_per_step == 8
    # Same seed: each baseline run ends with the weights doctor records for its length.
    assert report.param_checksum is not None
    assert report.runs[0].param_checksum == report.param_checksum == report.checksums[5]
    assert report.runs[1].param_checksum == report.checksums[report.verification_steps[1]]
    assert eff.tokens_per_s == pytest.approx(8 * 64 / report.noise.step_s)
    # Losses: the reassociation run split the batch differently, and the tolerance covers it.
    assert report.reorder is not None and report.reorder.status == "ok"
    assert report.reorder.knobs in ({"micro_batch_size": 8}, {"micro_batch_size": 2})
    assert report.losses.tolerance >= 10 * report.reorder.max_deviation
    # ... and ran to verification's long length, where its parameters' drift was measured.
    long = report.verification_steps[1]
    assert list(report.reassociation_drift) == [long] and 0 < report.reassociation_drift[long] < 1e-2
    # Launches (issue 49): the repeats, verification's short run, the reassociation run; the last
    # repeat ran at verification's long length, and with the short run it is verification's first
    # baseline round, with the spread of a round and the longest plausible start-up.
    launched = sorted(p.name for p in (dense_gpt / ".infrarsi" / "doctor").iterdir() if p.is_dir())
    assert launched == sorted(["baseline-1", "baseline-2", f"baseline-{report.verification_steps[0]}-steps",
                               "reassociation"])
    short, last = (TrialResult.from_dict(r) for r in report.reference_pair)
    assert (short.steps_run, last.steps_run) == tuple(report.verification_steps)
    assert short.process_s < last.process_s and set(report.checksums) >= set(report.verification_steps)
    assert report.round_cv > 0 and report.startup_limit_s > max(r.startup_s for r in report.runs)
    assert report.launches == 4
    assert report.losses.reference[-1] < report.losses.reference[0]  # the fixture learns

    contract = load_contract(dense_gpt)  # the hash was recomputed: this would raise otherwise
    assert contract.loss.reference == pytest.approx(report.losses.reference[:5])
    assert contract.loss.tolerance == report.losses.tolerance
    assert contract.digest() == report.contract_hash
    assert (dense_gpt / ".infrarsi" / "doctor" / "baseline-1" / "output.log").exists()
    # The machine's normal background, measured before and while the baseline ran (issue 20).
    bg = report.background
    assert bg is not None and bg.cores == len(os.sched_getaffinity(0)) and 0 <= bg.idle_cores <= bg.cores
    assert bg.limit_cores >= bg.normal_cores + 0.3 - 1e-9 and bg.normal_denied <= bg.limit_denied


@pytest.mark.e2e
def test_doctor_json_output_and_a_failing_baseline(dense_gpt, capsys):
    (dense_gpt / "model.py").write_text("raise SystemExit('broken model')\n")
    assert main(["doctor", str(dense_gpt), "--repeats", "2", "--json"]) == 1
    captured = capsys.readouterr()
    assert "baseline run 1 ended crash" in captured.err and "broken model" in captured.err
    assert load_doctor(dense_gpt) is None


def test_load_doctor_refuses_an_unreadable_report(tmp_path):
    (tmp_path / ".infrarsi").mkdir()
    (tmp_path / ".infrarsi" / "doctor.json").write_text("{not json")
    with pytest.raises(DoctorError, match="not valid JSON"):
        load_doctor(tmp_path)


def _run(step_times, phases, losses, peak=500_000_000, facts=None):
    return TrialResult(status=TrialStatus.OK, candidate=Candidate(), step_times=step_times, losses=losses,
                       tokens_per_step=512, peak_bytes=peak, startup_s=3.0, phases=phases,
                       model_facts=facts or {})


def test_summarize_splits_the_step_and_flags_uncovered_time(tmp_path):
    contract = dense_gpt_contract(_locked_repo(tmp_path), warmup=1, measured=3)
    losses = [5.0, 4.5, 4.0, 3.8]
    runs = [_run([1.0, 1.0, 1.0], {"forward": 0.3, "backward": 0.3}, losses),
            _run([1.1, 1.1, 1.1], {"forward": 0.3, "backward": 0.3}, losses)]
    report = summarize(contract, runs, {}, None, fingerprint(), None, 1)
    assert report.phases.step_s == pytest.approx(1.05)
    assert report.phases.other_s == pytest.approx(0.45)
    assert not report.phases.covered
    assert any("cover 57%" in w for w in report.warnings)
    assert report.efficiency.mfu is None and report.efficiency.flops_per_token is None
    assert list(report.phases.shares())[0] == "other"


def test_summarize_computes_mfu_from_model_facts_and_the_peak(tmp_path):
    contract = dense_gpt_contract(_locked_repo(tmp_path), warmup=1, measured=3)
    facts = {"params": 1000, "active_params": 1000, "layers": 1, "heads": 1, "head_dim": 4, "seq_len": 8}
    phases = {"data": 0.1, "forward": 0.4, "backward": 0.45}
    runs = [_run([1.0, 1.0, 1.0], phases, [5.0, 4.0, 3.0, 2.0], facts=facts) for _ in range(2)]
    peak = PeakFlops(value=1e7, source="test", device="cpu", dtype="fp32", method="measured", threads=2)
    report = summarize(contract, runs, {}, None, fingerprint(), peak, 1)
    fpt = 6 * 1000 + 12 * 1 * 1 * 4 * 8
    assert report.efficiency.flops_per_token == fpt
    assert report.efficiency.mfu == pytest.approx(512 * fpt / 1e7)
    assert report.phases.covered and report.efficiency.projected_job_s == pytest.approx(3.0 + 1000 * 1.0)
    round_trip = type(report).from_dict(json.loads(json.dumps(report.to_dict())))
    assert round_trip == report
    # The facts travel with the record: the experience bank's signature is built from them.
    assert round_trip.model_facts == facts


def test_mfu_uses_the_counted_flops_and_keeps_6n_as_the_cross_check(tmp_path):
    contract = dense_gpt_contract(_locked_repo(tmp_path), warmup=1, measured=3)
    facts = {"params": 1000, "layers": 1, "heads": 1, "head_dim": 4, "seq_len": 8}
    runs = [_run([1.0, 1.0, 1.0], {}, [5.0, 4.0, 3.0, 2.0], facts=facts) for _ in range(2)]
    for r in runs:
        r.flops_per_step, r.flops_source, r.param_checksum = 2e6, "FlopCounterMode", [1.0, 2.0]
    peak = PeakFlops(value=1e7, source="test", device="cpu", dtype="fp32", method="measured", threads=2)
    report = summarize(contract, runs, {}, None, fingerprint(), peak, 1)
    eff = report.efficiency
    assert eff.mfu == pytest.approx(2e6 / 1e7) and eff.mfu_source == "FlopCounterMode"
    assert eff.flops_per_step_6n == 512 * (6 * 1000 + 12 * 1 * 1 * 4 * 8)
    assert any("6N+12LHQT from the probe's model facts gives" in w for w in report.warnings)
    assert report.param_checksum == [1.0, 2.0] and "FlopCounterMode FLOPs" in " ".join(report.findings)
    for r in runs:
        r.flops_per_step = None
    assert summarize(contract, runs, {}, None, fingerprint(), peak, 1).efficiency.mfu_source == "6N+12LHQT"


def test_a_workload_without_tokens_is_held_to_its_samples(tmp_path):
    contract = dense_gpt_contract(_locked_repo(tmp_path))
    contract.workload.tokens_per_step = contract.workload.seq_len = contract.workload.global_batch = 0
    runs = [_run([1.0, 1.0], {}, [1.0, 0.9]) for _ in range(2)]
    for r in runs:
        r.tokens_per_step, r.samples_per_step = None, 32
    learned = with_measured_workload(contract, runs).workload
    assert (learned.tokens_per_step, learned.samples_per_step, learned.global_batch) == (0, 32, 32)
    # Token ids of shape (sequences, length), no probe: the sequence length is their ratio.
    for r in runs:
        r.tokens_per_step, r.model_facts = 512, {}
    learned = with_measured_workload(contract, runs).workload
    assert (learned.tokens_per_step, learned.seq_len, learned.global_batch) == (512, 16, 32)


def test_unknown_tokens_per_step_are_learned_from_the_baseline(tmp_path):
    contract = dense_gpt_contract(_locked_repo(tmp_path))
    contract.workload.tokens_per_step = contract.workload.seq_len = contract.workload.global_batch = 0
    facts = {"params": 1000, "layers": 1, "heads": 1, "head_dim": 4, "seq_len": 64}
    runs = [_run([1.0, 1.0], {}, [1.0, 0.9], facts=facts) for _ in range(2)]
    learned = with_measured_workload(contract, runs)
    assert (learned.workload.tokens_per_step, learned.workload.seq_len, learned.workload.global_batch) == (512, 64, 8)
    runs[1].tokens_per_step = 256
    with pytest.raises(DoctorError, match="consistently"):
        with_measured_workload(contract, runs)


def test_the_model_shape_comes_from_the_probe_s_facts_where_the_contract_has_none(tmp_path):
    contract = dense_gpt_contract(_locked_repo(tmp_path))
    facts = {"params": 1000, "layers": 2, "heads": 4, "head_dim": 16, "seq_len": 64}
    learned = with_measured_workload(contract, [_run([1.0, 1.0], {}, [1.0, 0.9], facts=facts)]).workload
    assert (learned.hidden, learned.heads, learned.layers, learned.params) == (64, 4, 2, 1000)
    assert with_measured_workload(contract, [_run([1.0, 1.0], {}, [1.0, 0.9])]).workload.hidden == 0
    # The script's own facts over init's reading of its knobs' names.
    contract.workload.hidden, contract.workload.heads = 128, 8
    learned = with_measured_workload(contract, [_run([1.0, 1.0], {}, [1.0, 0.9], facts=facts)]).workload
    assert (learned.hidden, learned.heads) == (64, 4)
    assert with_measured_workload(contract, [_run([1.0, 1.0], {}, [1.0, 0.9])]).workload.hidden == 128


def test_an_evaluation_batch_is_searched_only_where_the_trials_reach_an_evaluation(tmp_path):
    contract = dense_gpt_contract(_locked_repo(tmp_path))
    contract.knobs.append(Knob(name="eval_batch_size", role="eval_batch", type="int", default=64,
                               flag="--eval_batch_size", domain=[32, 64, 128], tunable=True))
    plain = [_run([0.1, 0.1, 0.1, 0.1], {}, [1.0]) for _ in range(2)]
    fixed = with_evaluations_measured(contract, plain)
    assert not fixed.knob("eval_batch_size").tunable and fixed.knob("micro_batch_size").tunable
    assert "eval_batch_size: the batch of an evaluation that no trial's measured steps reach" in fixed.workload.notes[-1]
    # An evaluation every few steps shows as a step carrying extra work in every run: searched.
    evaluating = [_run([0.1, 0.1, 0.6, 0.1], {}, [1.0]) for _ in range(2)]
    assert with_evaluations_measured(contract, evaluating).knob("eval_batch_size").tunable


def _locked_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("__pycache__"))
    return repo


def test_a_much_faster_precision_on_the_machine_is_named_as_the_headroom():
    """The H200 run: an fp32 job at 50% of the fp32 peak, where bf16 does 14.8x the work a second."""
    fp32 = PeakFlops(value=67e12, source="datasheet", device="cuda", dtype="fp32", method="datasheet")
    bf16 = PeakFlops(value=989.5e12, source="datasheet", device="cuda", dtype="bf16", method="datasheet")
    eff = Efficiency(tokens_per_step=16384, tokens_per_s=39455.7, projected_job_s=93.3, devices=1,
                     flops_per_token=8.5e8, achieved_flops=33.7e12, peak=fp32, mfu=0.503, machine_peak=bf16)
    [said] = precision_headroom(eff)
    assert "3.4% of the machine's bf16 peak" in said and "14.8x the fp32 work" in said
    assert precision_headroom(replace(eff, machine_peak=fp32)) == []
    assert precision_headroom(replace(eff, machine_peak=replace(bf16, value=80e12))) == []
