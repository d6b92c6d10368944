"""The null test of verification: the baseline against itself, many times, on whole processes.

The paced job (tests/test_data/stages/paced: a real process stepping through the probe at a pace
set by its knobs) after the real ``init`` and ``doctor``. Each repetition is one verification as
``infrarsi run`` does it (``whole_process.interleave`` with the run's rounds, lengths and promotion
floor, every run a real trial through ``run_trial``): the baseline, and as its only candidate the
baseline again under a patch that changes nothing but a comment in train.py, so the two arms run
the same work. No repetition may promote; the table is the distribution of the job speed-ups it
measured (whole processes) beside the per-step ones its step records told.

    .venv/bin/python bench/null.py [--repeats 30] [--rounds-least 3] [--rounds-most 6]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from infrarsi.contract import STATE_DIR, load_contract
from infrarsi.noise import PROMOTION_FLOOR
from infrarsi.patches.diff_patch import LLM_PREFIX
from infrarsi.patches.llm_proposals import diff_id, static_problem
from infrarsi.records import load_doctor
from infrarsi.records.files import patch_dir
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.stages.doctor import doctor
from infrarsi.stages.init import init
from infrarsi.trials import Candidate, TrialResult
from infrarsi.whole_process import Lengths, Rounds, interleave

ROOT = Path(__file__).resolve().parents[1]
PACED = ROOT / "tests" / "test_data" / "stages" / "paced"
NOOP = """--- a/train.py
+++ b/train.py
@@ -9,3 +9,3 @@
 import argparse
-import time
+import time  # the same job

"""


def prepared(where: Path) -> Path:
    repo = where / "paced"
    shutil.copytree(PACED, repo, ignore=shutil.ignore_patterns("__pycache__", STATE_DIR))
    done = init(repo, budget_bytes=128 * 2**20)
    if not done.ok:
        raise SystemExit(done.message)
    if not (measured := doctor(repo, repeats=3)).ok:
        raise SystemExit(measured.message)
    return repo


def stored(repo: Path, contract) -> str:
    """The no-op diff where a model's proposals are kept, checked as they are; its patch name."""
    problem = static_problem(repo, contract, NOOP)
    if problem:
        raise SystemExit(f"the no-op diff is refused: {problem[1]}")
    path = patch_dir(repo) / f"{diff_id(NOOP)}.diff"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(NOOP)
    return f"{LLM_PREFIX}{diff_id(NOOP)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rounds-least", type=int, default=Rounds().least)
    parser.add_argument("--rounds-most", type=int, default=Rounds().most)
    args = parser.parse_args()
    console = Console(highlight=False)
    rounds = Rounds(least=args.rounds_least, most=args.rounds_most)
    with tempfile.TemporaryDirectory(prefix="infrarsi-null-") as tmp:
        repo = prepared(Path(tmp))
        contract, report = load_contract(repo), load_doctor(repo)
        noop = stored(repo, contract)
        lengths = Lengths.recorded(contract.workload, report.verification_steps)
        baseline, same = Candidate(), Candidate(patches=(noop,))

        def run_one(candidate: Candidate, _round: int, steps: int) -> TrialResult:
            return run_trial(TrialSpec(repo=repo, contract=contract, candidate=candidate, steps=steps,
                                       reference_checksums=report.checksums,
                                       reassociation_drift=report.reassociation_drift, background=report.background))

        rows = []
        started = time.monotonic()
        for i in range(args.repeats):
            (verdict,), _ = interleave([same], baseline, run_one, rounds=rounds, lengths=lengths,
                                       floor=PROMOTION_FLOOR, compare_steps=contract.loss.compare_steps)
            rows.append(verdict)
            job = verdict.job_speedup
            console.print(f"{i + 1}/{args.repeats}: {'PROMOTED' if verdict.promoted else 'not promoted'}, "
                          f"job {job[0]:.3f}x [{job[1]:.3f}, {job[2]:.3f}]" if job else verdict.reason)
        wall = time.monotonic() - started

    table = Table(title=f"The baseline against itself (no-op patch {noop}), {args.repeats} verifications "
                        f"of {rounds.least}-{rounds.most} rounds, {lengths.short} and {lengths.long} steps, "
                        f"planned {lengths.planned}; {wall:.0f} s")
    for column in ("#", "promoted", "rounds", "job speed-up (whole processes)", "per step (whole processes)",
                   "per step (step records)", "reason"):
        table.add_column(column)
    for i, v in enumerate(rows, 1):
        table.add_row(str(i), "yes" if v.promoted else "no", str(len(v.cand_job_s)), _interval(v.job_speedup),
                      _interval(v.step_speedup), _interval(v.record_step_speedup), v.reason[:60])
    console.print(table)
    points = sorted(v.job_speedup[0] for v in rows if v.job_speedup)
    if points:
        quartiles = statistics.quantiles(points, n=4) if len(points) > 1 else points * 3
        console.print(f"job speed-up points: min {points[0]:.3f}, quartiles {', '.join(f'{q:.3f}' for q in quartiles)}, "
                      f"max {points[-1]:.3f}; lows above 1: {sum(v.job_speedup[1] > 1 for v in rows if v.job_speedup)}")
    console.print(f"promotions: {sum(v.promoted for v in rows)} of {len(rows)} (floor {PROMOTION_FLOOR:.3f})")


def _interval(values: tuple[float, float, float] | None) -> str:
    return f"{values[0]:.3f} [{values[1]:.3f}, {values[2]:.3f}]" if values else "–"


if __name__ == "__main__":
    main()
