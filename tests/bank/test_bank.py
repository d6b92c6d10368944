import math
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from infrarsi.bank import BestConfig, EffectFinding, ExperienceBank, PatchFinding, WorkloadSignature, resolve_url
from infrarsi.bank.store import OTHER_HARDWARE_SD, UNKNOWN_NOISE_CV, finding_sd
from infrarsi.contract import Contract, LossInvariant, MemoryBudget, Scope, Workload
from infrarsi.trials import Candidate

HERE, THERE = "hw-2core", "hw-8core"


def signature(params=4_240_000, tokens=2048, device="cpu", active=None) -> WorkloadSignature:
    contract = Contract(
        workload=Workload(entry="train.py", command=["python", "train.py"], tokens_per_step=tokens, seq_len=128,
                          global_batch=tokens // 128, seed=1, warmup_steps=2, measured_steps=8, planned_steps=1000),
        loss=LossInvariant(compare_steps=5, tolerance=1e-5, numerics_tolerance=1e-4),
        memory=MemoryBudget(budget_bytes=2**30, device=device),
        scope=Scope(editable=["model.py"]),
        knobs=[],
    )
    return WorkloadSignature.from_contract(contract, {"params": params, "active_params": active or params})


GPT = signature()


def effect(key="batch_size=4", t=0.2, sd=0.05, m=-0.3, msd=0.05, baseline=16, n=4, cv=0.02) -> EffectFinding:
    role, value = ("patch", "on") if key.startswith("patch:") else ("micro_batch", key.split("=")[1])
    return EffectFinding(key=key, role=role, value=value, baseline=baseline, time_log=t, time_sd=sd,
                         mem_log=m, mem_sd=msd, n=n, noise_cv=cv)


def trusted(t=0.2, sd=0.05, n=4, cv=0.02, days=0.0) -> float:
    return finding_sd(t, sd, n, cv, days)


def best(speedup, **knobs) -> BestConfig:
    return BestConfig(candidate=Candidate(knobs=knobs), speedup=speedup, interval=(speedup * 0.95, speedup * 1.05))


def test_signature_buckets_sizes_and_tells_families_apart():
    assert signature(params=4_240_000).key == signature(params=4_900_000).key  # same log2 bucket
    assert GPT.similarity(GPT) == 1.0
    assert 0.3 < GPT.similarity(signature(params=8_500_000)) < 1.0
    assert GPT.similarity(signature(device="cuda")) < 0.3
    moe = signature(active=1_000_000)
    assert moe.family == "moe" and GPT.family == "dense" and GPT.similarity(moe) <= 0.5


def test_a_run_reads_back(bank):
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    run_id = bank.record_run(signature=GPT, hardware_id=HERE, hardware="EPYC, 2 threads", recorded_at=when,
                             effects=[effect()], verdicts=[PatchFinding(patch="sdpa_attention", verdict="ok",
                                                                        time_log=-0.02)],
                             best=[best(1.3, batch_size=32, compile=False)])
    (seed,) = bank.seeds(GPT, HERE)
    assert seed.run_id == run_id and seed.candidate == Candidate(knobs={"batch_size": 32, "compile": False})
    assert (seed.speedup, seed.same_hardware, seed.similarity, seed.hardware) == (1.3, True, 1.0, "EPYC, 2 threads")
    assert seed.recorded_at.replace(tzinfo=UTC) == when
    prior = bank.priors_for(GPT, HERE, now=when).get("batch_size=4")
    assert (prior.time_log_mean, prior.mem_log_mean) == pytest.approx((0.2, -0.3))
    assert prior.time_log_sd == pytest.approx(trusted()) and "4 trial(s) in 1 run(s) on this hardware" in prior.source
    assert "run noise CV 2.0%" in prior.source
    (finding, sim, same), = bank.verdicts(GPT, HERE)["sdpa_attention"]
    assert (finding.verdict, finding.time_log, sim, same) == ("ok", -0.02, 1.0, True)


def test_seeds_rank_same_workload_then_same_hardware_then_speedup(bank):
    bank.record_run(signature=GPT, hardware_id=THERE, hardware="8 threads", best=[best(2.0, batch_size=64)])
    bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads", best=[best(1.2, batch_size=8),
                                                                                 best(1.5, batch_size=32)])
    bank.record_run(signature=signature(params=9_000_000), hardware_id=HERE, hardware="2 threads",
                    best=[best(3.0, batch_size=4)])
    bank.record_run(signature=signature(device="cuda"), hardware_id="hw-h100", hardware="H100",
                    best=[best(5.0, batch_size=128)])
    seeds = bank.seeds(GPT, HERE, k=10)
    assert [s.candidate.knobs["batch_size"] for s in seeds] == [32, 8, 64, 4]  # the CUDA run is too unlike
    assert [s.same_hardware for s in seeds] == [True, True, False, True]
    assert seeds[-1].similarity < 1.0
    assert len(bank.seeds(GPT, HERE, k=2)) == 2


def test_the_same_candidate_is_seeded_once_from_its_closest_run(bank):
    bank.record_run(signature=GPT, hardware_id=THERE, hardware="8 threads", best=[best(2.0, batch_size=32)])
    bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads", best=[best(1.4, batch_size=32)])
    (seed,) = bank.seeds(GPT, HERE)
    assert seed.same_hardware and seed.speedup == 1.4


def test_priors_are_tight_on_the_same_hardware_and_widened_on_other_hardware(bank):
    bank.record_run(signature=GPT, hardware_id=THERE, hardware="8 threads", effects=[effect(t=0.5, sd=0.05)])
    here = bank.priors_for(GPT, HERE).get("batch_size=4")
    assert here.time_log_mean == pytest.approx(0.5)
    assert here.time_log_sd == pytest.approx(math.hypot(trusted(t=0.5), OTHER_HARDWARE_SD), rel=1e-4)
    assert "other hardware (8 threads)" in here.source

    bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads", effects=[effect(t=0.1, sd=0.05)])
    here = bank.priors_for(GPT, HERE).get("batch_size=4")
    assert (here.time_log_mean, here.time_log_sd) == pytest.approx((0.1, trusted(t=0.1)), rel=1e-4)  # own hardware wins


def test_repeated_findings_pool_and_other_workloads_widen_more(bank):
    for t in (0.1, 0.3):
        bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads", effects=[effect(t=t, sd=0.1)])
    pooled = bank.priors_for(GPT, HERE).get("batch_size=4")
    assert pooled.time_log_mean == pytest.approx(0.2)
    assert pooled.time_log_sd == pytest.approx(trusted(sd=0.1) / math.sqrt(2), rel=1e-4)  # two runs, not one

    bigger = signature(params=17_000_000)
    bank.record_run(signature=bigger, hardware_id=HERE, hardware="2 threads", effects=[effect("batch_size=2")])
    far = bank.priors_for(GPT, HERE).get("batch_size=2")
    assert far.time_log_sd > 0.05 and "similarity" in far.source


def test_a_parallel_layout_s_findings_stay_on_the_hardware_that_measured_them(bank):
    """ZeRO's shards, the pipeline's micro-batches, the links a group spans follow the cluster."""
    tp = EffectFinding(key="tp=2", role="tensor_parallel", value=2, baseline=8, time_log=-0.2, time_sd=0.05, n=4,
                       noise_cv=0.02)
    bank.record_run(signature=GPT, hardware_id=THERE, hardware="64 GPUs", effects=[tp, effect()])
    assert "tp=2" not in bank.priors_for(GPT, HERE) and "batch_size=4" in bank.priors_for(GPT, HERE)
    assert bank.priors_for(GPT, THERE).get("tp=2").time_log_mean == pytest.approx(-0.2)


def test_a_finding_transfers_as_its_surprise_over_its_run_s_own_priors(bank):
    """Measured 0.1 where its run's priors expected 0.3: elsewhere it says "0.2 below what the priors
    expect", so a workload whose own prior is -0.4 reads -0.6; without that prior, or a finding
    without its run's expectation, the measurement as it is."""
    from dataclasses import replace

    from infrarsi.priors.types import Prior, PriorTable

    bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads",
                    effects=[replace(effect(t=0.1), prior_log=0.3), effect("batch_size=2", t=0.1)])
    own = PriorTable.of([Prior(key=k, time_log_mean=-0.4, time_log_sd=0.1, mem_log_mean=0.0, mem_log_sd=0.1,
                               source="builtin") for k in ("batch_size=4", "batch_size=2")])
    rebased = bank.priors_for(GPT, HERE, reference=own)
    assert rebased.get("batch_size=4").time_log_mean == pytest.approx(-0.6)
    assert rebased.get("batch_size=4").time_log_sd == pytest.approx(trusted(t=0.1), rel=1e-4)
    assert "surprise over its run's own priors" in rebased.get("batch_size=4").source
    assert rebased.get("batch_size=2").time_log_mean == pytest.approx(0.1)
    assert bank.priors_for(GPT, HERE).get("batch_size=4").time_log_mean == pytest.approx(0.1)
    (run,) = bank.runs()
    assert sorted((e.key, e.time_log) for e in run.effects) == [("batch_size=2", 0.1), ("batch_size=4", 0.1)]


def test_a_finding_is_never_surer_than_the_noise_of_the_trials_it_came_from(bank):
    """The issue's busy-machine run: one disturbed trial read back as x11.93 [11.70, 12.17]."""
    day = datetime(2026, 12, 1, tzinfo=UTC)
    twelve = EffectFinding(key="threads=2", role="threads", value=2, baseline=1, time_log=math.log(11.93),
                           time_sd=0.01, n=1, noise_cv=0.03)
    bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads", effects=[twelve], recorded_at=day)
    lone = bank.priors_for(GPT, HERE, now=day).get("threads=2")
    # One trial cannot tell an effect from a disturbed run: its band reaches back to "no effect".
    assert lone.time_log_sd >= lone.time_log_mean > 2.4
    # More trials narrow a finding, never below what the run's noise allows n trials against a baseline.
    sds = {}
    for n, cv in ((2, 0.03), (3, 0.03), (6, 0.03), (6, 0.10)):
        sds[n, cv] = trusted(t=0.14, sd=0.01, n=n, cv=cv)
        assert sds[n, cv] > math.sqrt(2) * cv / math.sqrt(n)
    assert sds[2, 0.03] > sds[3, 0.03] > sds[6, 0.03] and sds[6, 0.10] > sds[6, 0.03]
    # Age widens; so do one run against two (a run shifts all its findings together).
    assert trusted(days=365) > trusted(days=30) > trusted()
    sdpa = [effect("patch:sdpa_attention", t=math.log(1.15), sd=0.01, n=3, cv=0.03, baseline="off")]
    bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads", effects=sdpa, recorded_at=day)
    one_run = bank.priors_for(GPT, HERE, now=day).get("patch:sdpa_attention").time_log_sd
    bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads", effects=sdpa, recorded_at=day)
    two_runs = bank.priors_for(GPT, HERE, now=day).get("patch:sdpa_attention").time_log_sd
    assert one_run > 0.05 and two_runs == pytest.approx(one_run / math.sqrt(2))
    # Another fingerprint and a less alike workload widen further.
    assert bank.priors_for(GPT, THERE, now=day).get("patch:sdpa_attention").time_log_sd > two_runs
    farther = bank.priors_for(signature(params=9_000_000), HERE, now=day)
    assert farther.get("patch:sdpa_attention").time_log_sd > two_runs


def test_a_bank_written_before_the_noise_was_stored_is_migrated_and_read_as_noisy(bank_url):
    """An older InfraRSI's bank has no noise_cv column: opening it adds the column, and its rows
    read as measured on a shared machine (UNKNOWN_NOISE_CV)."""
    from sqlalchemy import inspect, text

    with ExperienceBank(bank_url) as bank:
        run_id = bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads")
        with bank.engine.begin() as conn:
            conn.execute(text("ALTER TABLE bank_effects DROP COLUMN noise_cv"))
            conn.execute(text("INSERT INTO bank_effects (run_id, key, role, value, baseline, time_log, time_sd, n) "
                              "VALUES (:run, 'batch_size=4', 'micro_batch', '4', '16', 0.2, 0.01, 3)"), {"run": run_id})
        assert "noise_cv" not in {c["name"] for c in inspect(bank.engine).get_columns("bank_effects")}
    with ExperienceBank(bank_url) as bank:
        assert "noise_cv" in {c["name"] for c in inspect(bank.engine).get_columns("bank_effects")}
        prior = bank.priors_for(GPT, HERE).get("batch_size=4")
        assert prior.time_log_sd == pytest.approx(finding_sd(0.2, 0.01, 3, UNKNOWN_NOISE_CV, 0.0), rel=1e-3)
        assert "run noise unknown" in prior.source
        (run,) = bank.runs()
        assert run.effects[0].noise_cv is None
        bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads", effects=[effect(cv=0.04)])
        assert sorted(e.noise_cv or 0 for r in bank.runs() for e in r.effects) == [0, 0.04]


def test_findings_are_forgotten_by_id_key_run_and_date(bank):
    old, new = datetime(2025, 1, 1, tzinfo=UTC), datetime(2026, 6, 1, tzinfo=UTC)
    first = bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads", recorded_at=old,
                            effects=[effect(), effect("patch:sdpa_attention", baseline="off")],
                            verdicts=[PatchFinding(patch="sdpa_attention", verdict="ok")])
    second = bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads", recorded_at=new,
                             effects=[effect(), effect("batch_size=8")], best=[best(1.3, batch_size=8)])
    assert [r.id for r in bank.runs()] == [first, second]
    eight = next(e.id for e in bank.runs()[1].effects if e.key == "batch_size=8")
    assert bank.forget(finding=str(eight)).effects == 1 and "batch_size=8" not in bank.priors_for(GPT, HERE)
    gone = bank.forget(finding="patch:sdpa_attention")
    assert (gone.effects, gone.verdicts) == (1, 1) and not bank.verdicts(GPT, HERE)
    gone = bank.forget(before=datetime(2026, 1, 1, tzinfo=UTC))
    assert (gone.runs, gone.effects) == (1, 1) and [r.id for r in bank.runs()] == [second]
    gone = bank.forget(run_id=second)
    assert (gone.runs, gone.effects, gone.best) == (1, 1, 1) and not bank.runs() and not bank.seeds(GPT, HERE)
    with pytest.raises(ValueError, match="exactly one"):
        bank.forget(finding="x", run_id="y")


def test_effects_against_another_default_are_not_used(bank):
    bank.record_run(signature=GPT, hardware_id=HERE, hardware="2 threads",
                    effects=[effect(baseline=8), effect("patch:sdpa_attention", baseline="off")])
    table = bank.priors_for(GPT, HERE, baselines={"batch_size": 16})
    assert "batch_size=4" not in table and "patch:sdpa_attention" in table
    assert "batch_size=4" in bank.priors_for(GPT, HERE, baselines={"batch_size": 8})


def test_findings_are_validated_before_they_are_stored():
    with pytest.raises(ValueError, match="verdict"):
        PatchFinding(patch="x", verdict="great")
    with pytest.raises(ValueError, match="positive"):
        effect(sd=0.0)
    with pytest.raises(ValueError, match="interval"):
        BestConfig(candidate=Candidate(), speedup=1.2, interval=(1.3, 1.1))


WRITER = """
import sys
from infrarsi.bank import EffectFinding, ExperienceBank, WorkloadSignature
sig = WorkloadSignature(family="dense", params_bucket=22, tokens_bucket=11, seq_bucket=7, device="cpu",
                        launcher="python")
with ExperienceBank(sys.argv[1]) as bank:
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(int(sys.argv[2])):
        bank.record_run(signature=sig, hardware_id=sys.argv[3], hardware="writer", effects=[
            EffectFinding(key=f"batch_size={i}", role="micro_batch", value=i, baseline=16, time_log=0.1,
                          time_sd=0.1, n=1)])
"""


def test_two_processes_write_at_once(bank_url):
    runs = 25
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, bank_url, str(runs), f"hw-{w}"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for w in range(2)]
    for w in writers:  # both have opened the bank (and raced to create it) before either writes
        assert w.stdout.readline().strip() == "ready"
    for w in writers:
        w.stdin.write("go\n")
        w.stdin.flush()
    for w in writers:
        assert w.wait(timeout=120) == 0
    with ExperienceBank(bank_url) as bank:
        sig = WorkloadSignature(family="dense", params_bucket=22, tokens_bucket=11, seq_bucket=7, device="cpu",
                                launcher="python")
        table = bank.priors_for(sig, "hw-0")
        assert len(table) == runs
        assert all("this hardware" in table.get(k).source for k in table)


def test_the_url_defaults_to_a_user_file_and_the_environment_overrides_it(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("INFRARSI_BANK_URL", raising=False)
    assert resolve_url() == f"sqlite:///{tmp_path}/.infrarsi/bank.db" and (tmp_path / ".infrarsi").is_dir()
    monkeypatch.setenv("INFRARSI_BANK_URL", f"sqlite:///{tmp_path}/team/bank.db")
    assert resolve_url() == f"sqlite:///{tmp_path}/team/bank.db"
    assert resolve_url("postgresql://u:p@db/bank") == "postgresql://u:p@db/bank"
