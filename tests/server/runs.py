"""The ``.infrarsi/run.json`` a run leaves when it promotes a candidate, for tests that start there."""

from __future__ import annotations

from pathlib import Path

from infrarsi.records import RunResult, TrialRow, Verdict, save_run
from infrarsi.trials import Candidate

PROMOTED = Candidate(knobs={"micro_batch_size": 8}, patches=("sdpa_attention",))


def promoted_run(repo: Path) -> RunResult:
    verdict = Verdict(candidate=PROMOTED, promoted=True, reason="clears the noise floor",
                      job_speedup=(1.21, 1.12, 1.30), step_speedup=(1.25, 1.15, 1.34),
                      base_step_s=[0.050, 0.051, 0.049], cand_step_s=[0.040, 0.041, 0.040], max_loss_diff=1e-7,
                      statuses=["ok", "ok", "ok"])
    row = TrialRow(number=3, kind="verification", status="ok", candidate=PROMOTED.to_dict(), step_s=0.04,
                   job_s=9.0, peak_bytes=300 << 20, wall_s=6.0, detail="")
    run = RunResult(status="ok", message="promoted: 1.21x faster (95% CI low 1.12x)", run_id="20261129-120000-beef",
                    trials=[row], verdicts=[verdict], promoted=verdict, noise_floor=1.03)
    save_run(run, repo)
    return run
