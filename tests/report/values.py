"""Report inputs built as values, with no study and no trial: a contract with every way a knob is
passed, doctor's record from the report test data, and runs that promote or do not."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from infrarsi.contract import Contract, Knob, LossInvariant, MemoryBudget, Scope, Workload
from infrarsi.records import DoctorReport, PeakFlops, RunResult, TrialRow, Verdict
from infrarsi.report.model import Report, build_report
from infrarsi.trials import Candidate, TrialResult, TrialStatus

DATA = Path(__file__).parents[1] / "test_data" / "report"
REPO = "/home/me/gpt"


def contract(**workload: Any) -> Contract:
    """A dataclass-config job: ``attention`` has no flag (it lives in the source), ``micro_batch``
    and ``max_iters`` are flags, ``grad_accum_splits`` is a flag a patch adds, and the launcher
    sets the thread count through a variable."""
    return Contract(
        workload=Workload(**{"entry": "train.py", "command": ["python", "train.py"], "tokens_per_step": 2048,
                             "seq_len": 128, "global_batch": 16, "seed": 1, "warmup_steps": 1, "measured_steps": 4,
                             "planned_steps": 500, **workload}),
        loss=LossInvariant(compare_steps=5, tolerance=1e-5, numerics_tolerance=0.05),
        memory=MemoryBudget(budget_bytes=2**30),
        scope=Scope(editable=["train.py", "model.py"]),
        knobs=[
            Knob(name="max_iters", role="steps", type="int", default=500, flag="--max_iters"),
            Knob(name="micro_batch", role="micro_batch", type="int", default=4, flag="--micro_batch",
                 domain=[2, 4, 8], tunable=True),
            Knob(name="attention", role="attention_impl", type="str", default="manual", source="model.py:9",
                 domain=["manual", "sdpa"], tunable=True),
            Knob(name="grad_accum_splits", role="grad_accum", type="int", default=1, flag="--grad_accum_splits",
                 domain=[1, 2, 4], tunable=True, patch="gradient_accumulation"),
            Knob(name="launcher_threads", role="threads", type="int", default=0, flag="OMP_NUM_THREADS",
                 flag_style="env", domain=[0, 1, 2], tunable=True, source="launcher"),
            Knob(name="lr", role="workload", type="float", default=3e-4, flag="--lr"),
            Knob(name="warmup_ratio", role="unknown", type="float", default=0.1, flag="--warmup_ratio"),
        ],
    )


def doctor(**efficiency: Any) -> DoctorReport:
    """The report test data's doctor record, its efficiency fields replaced by ``efficiency``."""
    report = DoctorReport.from_dict(json.loads((DATA / "doctor.json").read_text()))
    return replace(report, efficiency=replace(report.efficiency, **efficiency))


def cpu_peak(value: float, dtype: str = "fp32", threads: int = 2) -> PeakFlops:
    return PeakFlops(value=value, source=f"measured: best square matmul rate ({threads} threads)", device="cpu",
                     dtype=dtype, method="measured", threads=threads)


def candidate(**knobs: Any) -> Candidate:
    defaults = {k.name: k.default for k in contract().knobs}
    patches = tuple(knobs.pop("patches", ()))
    return Candidate(knobs={**defaults, **knobs}, patches=patches)


def row(number: int, kind: str, status: str, job_s: float | None = None, **knobs: Any) -> TrialRow:
    return TrialRow(number=number, kind=kind, status=status, candidate=candidate(**knobs).to_dict(),
                    step_s=job_s / 500 if job_s else None, job_s=job_s, peak_bytes=2**28, wall_s=10.0, detail="")


def verdict(cand: Candidate, speedup: tuple[float, float, float], promoted: bool, reason: str = "") -> Verdict:
    return Verdict(candidate=cand, promoted=promoted,
                   reason=reason or ("clears the floor" if promoted else "undecided"),
                   job_speedup=speedup, step_speedup=speedup, base_step_s=[0.30, 0.31, 0.30],
                   cand_step_s=[0.30 / speedup[0]] * 3, base_job_s=[150.0, 155.0, 150.0],
                   cand_job_s=[150.0 / speedup[0]] * 3, peak_bytes=2**28)


def run(trials: list[TrialRow], verdicts: list[Verdict] = (), **fields: Any) -> RunResult:
    promoted = next((v for v in verdicts if v.promoted), None)
    return RunResult(**{
        "status": "ok" if promoted else "no_promotion", "message": "promoted" if promoted else
        "no candidate ranked ahead of the baseline or measured faster than it to verify",
        "run_id": "20260105-101500-abcd", "baseline": TrialResult(status=TrialStatus.OK, candidate=candidate()),
        "trials": trials, "verdicts": list(verdicts), "promoted": promoted, "noise_floor": 1.04,
        "search_ended": "the budget of 4 trials", "spent_s": 10.0 * len(trials), **fields})


def report(the_run: RunResult, the_contract: Contract | None = None, the_doctor: DoctorReport | None = None) -> Report:
    """The report of ``the_run``, its study not opened (no hunks)."""
    return build_report(REPO, the_contract or contract(), the_doctor or doctor(), the_run, None)
