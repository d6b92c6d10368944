"""What the trial sandbox (bubblewrap, infrarsi/runner/sandbox.py) costs a trial.

fixtures/dense_gpt at the XS size, as real trials through ``run_trial``, with the sandbox and with
``--no-sandbox`` interleaved (the order alternates every pair, so drift and machine load fall on
both arms alike). Per trial: the median of its measured step times and its start-up (launch to the
first step, less that step: TrialResult.startup_s). Per pair: the sandboxed over the unsandboxed
step time, and the start-up difference. Also the bare cost of entering the sandbox: ``bwrap … true``
against ``true``. Goals (issue 19): step time within 1%, start-up within 0.5 s. Sandboxed trials
also read the shared bytecode prefix (docs/sandbox.md) while unsandboxed ones compile from source,
so the start-up column shows both costs together.

    .venv/bin/python bench/sandbox_overhead.py [--pairs 8] [--steps 40]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from infrarsi.byte_units import GIB
from infrarsi.contract import STATE_DIR, Contract, Knob, LossInvariant, MemoryBudget, Scope, Workload
from infrarsi.runner import sandbox
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialResult

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "dense_gpt"
XS = {"n_layer": 2, "n_head": 4, "n_embd": 128, "block_size": 64, "vocab_size": 512, "batch_size": 8,
      "micro_batch_size": 8, "threads": 1}
WARMUP = 5


def contract(steps: int) -> Contract:
    return Contract(
        workload=Workload(entry="train.py", command=["python", "train.py"], args=dict(XS),
                          tokens_per_step=XS["batch_size"] * XS["block_size"], seq_len=XS["block_size"],
                          global_batch=XS["batch_size"], seed=1337, warmup_steps=WARMUP,
                          measured_steps=steps - WARMUP, planned_steps=200),
        loss=LossInvariant(compare_steps=1, tolerance=1e-5, numerics_tolerance=1e-3),
        memory=MemoryBudget(budget_bytes=8 * GIB),
        scope=Scope(editable=["train.py"]),
        knobs=[Knob(name="max_iters", role="steps", type="int", default=200, flag="--max_iters")],
    )


def trial(repo: Path, steps: int, sandboxed: bool, log_dir: Path) -> TrialResult:
    result = run_trial(TrialSpec(repo=repo, contract=contract(steps), candidate=Candidate(), check_loss=False,
                                 log_dir=log_dir, sandbox=sandboxed))
    if not result.ok:
        raise RuntimeError(f"fixture trial ({'sandbox' if sandboxed else 'no sandbox'}) failed: "
                           f"{result.status.value}: {result.detail}")
    return result


def enter_cost(repeats: int = 30) -> tuple[float, float]:
    """Median seconds to run ``true`` bare and inside the sandbox as trials get it."""
    with tempfile.TemporaryDirectory() as tmp:
        mounts = sandbox.Mounts(workspace=Path(tmp), cwd=Path(tmp), repo=Path(tmp) / "repo")
        argv = sandbox.wrap([shutil.which("true")], mounts)
        out = []
        for command in ([shutil.which("true")], argv):
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                subprocess.run(command, check=True)
                times.append(time.perf_counter() - start)
            out.append(statistics.median(times))
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    problem = sandbox.bwrap_problem()
    if problem:
        raise SystemExit(problem)
    console = Console(highlight=False)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "dense_gpt"
        shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("__pycache__", STATE_DIR))
        trial(repo, 6, True, Path(tmp) / "warm")  # first-import costs (page cache) paid by neither arm
        runs: dict[bool, list[TrialResult]] = {True: [], False: []}
        for pair in range(args.pairs):
            for sandboxed in ((True, False) if pair % 2 == 0 else (False, True)):
                runs[sandboxed].append(trial(repo, args.steps, sandboxed, Path(tmp) / f"{pair}-{sandboxed}"))
    load_after = os.getloadavg()
    bare_true, wrapped_true = enter_cost()

    ratios = [s.step_time / n.step_time for s, n in zip(runs[True], runs[False], strict=True)]
    startup_diffs = [s.startup_s - n.startup_s for s, n in zip(runs[True], runs[False], strict=True)]
    table = Table(title=f"sandbox overhead: dense_gpt XS, {args.pairs} interleaved pairs, "
                        f"{args.steps - WARMUP} measured steps each")
    for column in ("", "no sandbox", "sandbox", "sandbox − none (median of pairs)", "pairs range", "goal"):
        table.add_column(column, justify="right")
    step = {k: statistics.median(r.step_time for r in v) for k, v in runs.items()}
    start = {k: statistics.median(r.startup_s for r in v) for k, v in runs.items()}
    table.add_row("step time (ms)", f"{step[False] * 1000:.2f}", f"{step[True] * 1000:.2f}",
                  f"{(statistics.median(ratios) - 1) * 100:+.2f}%",
                  f"{(min(ratios) - 1) * 100:+.1f}% … {(max(ratios) - 1) * 100:+.1f}%", "≤ 1%")
    table.add_row("start-up (s)", f"{start[False]:.3f}", f"{start[True]:.3f}",
                  f"{statistics.median(startup_diffs):+.3f} s",
                  f"{min(startup_diffs):+.3f} … {max(startup_diffs):+.3f} s", "≤ 0.5 s")
    table.add_row("`true` (ms)", f"{bare_true * 1000:.1f}", f"{wrapped_true * 1000:.1f}",
                  f"{(wrapped_true - bare_true) * 1000:+.1f} ms", "", "")
    console.print(table)
    console.print(f"load average (1, 5, 15 min) before {load_before}, after {load_after}; "
                  f"{os.cpu_count()} CPUs; bubblewrap at {sandbox.bwrap_path()}")


if __name__ == "__main__":
    main()
