"""What the trial runner costs and how fast it enforces the memory budget.

1. Probe overhead: fixtures/dense_gpt (XS size) run bare, with and without INFRARSI_PROBE_FILE,
   interleaved; step times from its own log lines (so both sides are timed the same way);
   median of the measured steps of each run, then the median over repeats.
2. Launch to first step: from the call to the first step seen, through ``run_trial`` (copy of
   the repo, spawn, polling) and for a bare ``python train.py`` reading its stdout.
3. OOM kill latency: a process that grows its RSS 2 MIB at a time, as fast as it can, under the
   runner's watchdog; milliseconds from the child's last report of an RSS still under the budget
   (so at most one 2 MIB chunk before the crossing) to the moment the whole tree is dead and
   reaped, and how far above the budget the watchdog saw it.

    .venv/bin/python bench/runner_overhead.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from infrarsi.byte_units import GIB, MIB
from infrarsi.contract import Contract, Knob, LossInvariant, MemoryBudget, Scope, Workload
from infrarsi.probe import ENV_FILE
from infrarsi.runner.process import TrialProcess
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.runner.watchdog import MemoryWatchdog
from infrarsi.trials import Candidate

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "dense_gpt"
# docs/measured.md's XS size: small enough that start-up is most of a short trial.
XS = {"n_layer": 2, "n_head": 4, "n_embd": 128, "block_size": 64, "vocab_size": 512, "batch_size": 8,
      "micro_batch_size": 8}
STEPS = 12
WARMUP = 2
LOG_TIME = re.compile(r"iter (\d+): loss \S+, time ([\d.]+)ms")

GROWER = """
import time
chunks = []
while True:
    rss = int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) * 1024
    print(time.time(), rss, flush=True)
    chunks.append(b"x" * (2 << 20))
"""


def xs_args(steps: int) -> list[str]:
    return [f"--{k}={v}" for k, v in {**XS, "max_iters": steps}.items()]


def bare_step_time(repo: Path, probe_file: Path | None) -> float:
    env = {k: v for k, v in os.environ.items() if k != ENV_FILE}
    if probe_file is not None:
        env[ENV_FILE] = str(probe_file)
    out = subprocess.run([sys.executable, "train.py", *xs_args(STEPS)], cwd=repo, env=env,
                         capture_output=True, text=True, check=True).stdout
    times = [float(ms) / 1000 for i, ms in LOG_TIME.findall(out) if int(i) >= WARMUP]
    return statistics.median(times)


def bare_first_step(repo: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "train.py", *xs_args(2)], cwd=repo, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    for line in proc.stdout:
        if line.startswith("iter 0"):
            elapsed = time.perf_counter() - start
            break
    proc.wait()
    return elapsed


def fixture_contract(repo: Path) -> Contract:
    return Contract(
        workload=Workload(entry="train.py", command=["python", "train.py"],
                          args={k: v for k, v in XS.items() if k != "micro_batch_size"},
                          tokens_per_step=XS["batch_size"] * XS["block_size"], seq_len=XS["block_size"],
                          global_batch=XS["batch_size"], seed=1337, warmup_steps=1, measured_steps=1,
                          planned_steps=200),
        loss=LossInvariant(compare_steps=1, tolerance=1e-5, numerics_tolerance=1e-3),
        memory=MemoryBudget(budget_bytes=8 * GIB),
        scope=Scope(editable=["train.py"]),
        knobs=[Knob(name="max_iters", role="steps", type="int", default=200, flag="--max_iters"),
               Knob(name="micro_batch_size", role="micro_batch", type="int", default=8, flag="--micro_batch_size")],
    )


def runner_first_step(repo: Path, log_dir: Path) -> float:
    seen: list[float] = []
    start = time.perf_counter()

    def on_event(event):
        if event.kind == "report" and not seen:
            seen.append(time.perf_counter() - start)

    result = run_trial(TrialSpec(repo=repo, contract=fixture_contract(repo), candidate=Candidate(),
                                 check_loss=False, log_dir=log_dir, on_event=on_event))
    if not result.ok:
        raise RuntimeError(f"fixture trial failed: {result.status.value}: {result.detail}")
    return seen[0]


def oom_kill(workdir: Path, budget: int) -> tuple[float, float, int]:
    """From the child's last report under the budget: ms until the watchdog froze the tree (it
    can grow no further), ms until the tree was dead and reaped; bytes seen above the budget."""
    log = workdir / "grower.log"
    process = TrialProcess([sys.executable, "-c", GROWER], cwd=workdir, env=dict(os.environ), log_path=log)
    frozen: list[float] = []

    def on_exceed(_level: int) -> None:
        frozen.append(time.time())
        process.kill()

    watchdog = MemoryWatchdog(process, budget, on_exceed).start()
    process.wait(timeout=60)
    dead = time.time()
    watchdog.stop()
    process.kill()
    reports = [line.split() for line in log.read_text().splitlines()]
    last_under = max(float(t) for t, rss in reports if int(rss) <= budget)
    return (frozen[0] - last_under) * 1000, (dead - last_under) * 1000, (watchdog.exceeded_at or 0) - budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    console = Console(highlight=False)
    with tempfile.TemporaryDirectory(prefix="infrarsi-bench-") as tmp:
        repo = Path(tmp) / "dense_gpt"
        shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("__pycache__"))
        without, with_probe = [], []
        for i in range(args.repeats):
            console.print(f"probe overhead, repeat {i + 1}/{args.repeats}…")
            without.append(bare_step_time(repo, None))
            with_probe.append(bare_step_time(repo, Path(tmp) / f"probe{i}.jsonl"))
        bare, runner = [], []
        for i in range(args.repeats):
            console.print(f"launch to first step, repeat {i + 1}/{args.repeats}…")
            bare.append(bare_first_step(repo))
            runner.append(runner_first_step(repo, Path(tmp) / f"trial{i}"))
        console.print("OOM kills…")
        kills = [oom_kill(Path(tmp), 300 * MIB) for _ in range(max(args.repeats, 5))]

    t_without, t_with = statistics.median(without), statistics.median(with_probe)
    table = Table(title=f"runner overhead (medians of {args.repeats} repeats; kills: {len(kills)})")
    for column in ("measure", "value", "detail"):
        table.add_column(column)
    table.add_row("step time, no probe", f"{t_without * 1000:.1f} ms", _spread(without, 1000, "ms"))
    table.add_row("step time, probe on", f"{t_with * 1000:.1f} ms", _spread(with_probe, 1000, "ms"))
    table.add_row("probe overhead", f"{(t_with / t_without - 1) * 100:+.2f} %", "of the step time")
    table.add_row("launch → first step, bare", f"{statistics.median(bare):.2f} s", _spread(bare, 1, "s"))
    table.add_row("launch → first step, runner", f"{statistics.median(runner):.2f} s", _spread(runner, 1, "s"))
    table.add_row("runner start-up overhead", f"{statistics.median(runner) - statistics.median(bare):+.2f} s",
                  "copy, spawn, polling")
    detect = [ms for ms, _, _ in kills]
    dead = [ms for _, ms, _ in kills]
    overshoot = [b / MIB for _, _, b in kills]
    table.add_row("OOM: under budget → tree frozen", f"{statistics.median(detect):.0f} ms",
                  f"min {min(detect):.0f}, max {max(detect):.0f} ms (SIGSTOP: growth ends here)")
    table.add_row("OOM: under budget → tree dead", f"{statistics.median(dead):.0f} ms",
                  f"min {min(dead):.0f}, max {max(dead):.0f} ms (SIGKILL, kernel frees, reaped)")
    table.add_row("OOM: level seen above budget", f"{statistics.median(overshoot):.0f} MIB",
                  f"max {max(overshoot):.0f} MIB (budget 300 MIB, grows 2 MIB at a time)")
    console.print(table)


def _spread(values: list[float], scale: float, unit: str) -> str:
    return "runs: " + ", ".join(f"{v * scale:.2f}" for v in values) + f" {unit}"


if __name__ == "__main__":
    main()
