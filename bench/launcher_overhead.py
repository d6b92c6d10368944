"""What measuring from outside costs: fixtures/dense_gpt (XS size) run bare and through the launcher,
interleaved.

- bare: ``python train.py`` with ``INFRARSI_PROBE_FILE`` and no launcher; step times are the
  probe's own (the job's clock); start-up is launch to the start of step 0 (the first probe line's
  arrival, polled every millisecond, minus the step time it reports).
- launcher: ``run_trial`` (a copy of the repo, the launcher's hooks, the FIFO, InfraRSI's clock);
  start-up is launch to the job's first forward (``TrialResult.startup_s``).

Both: the median of each run's measured steps (warm-up excluded), then the median over repeats.
Goals (issue 16): step time within 2%, start-up within 1 s.

Wall-clock steps on a shared machine move with its load, so what the hooks cost is measured as CPU
time too, which the load hardly moves: the fixture's model trained in one thread by a small loop
that reads ``time.process_time()`` around each step, in processes with and without the launcher
(interleaved; the launcher told never to stop the job).

    .venv/bin/python bench/launcher_overhead.py [--repeats 5] [--steps 22]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from infrarsi.byte_units import GIB
from infrarsi.contract import STATE_DIR, Contract, Knob, LossInvariant, MemoryBudget, Scope, Workload
from infrarsi.launcher import ENV_RECORDS, launcher_env
from infrarsi.launcher.channel import RecordChannel
from infrarsi.launcher.control import StepControl
from infrarsi.probe import ENV_FILE
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "dense_gpt"
XS = {"n_layer": 2, "n_head": 4, "n_embd": 128, "block_size": 64, "vocab_size": 512, "batch_size": 8,
      "micro_batch_size": 8}
WARMUP = 2


def bare(repo: Path, probe_file: Path, steps: int) -> tuple[float, float]:
    """(median measured step s, start-up s) of a bare run timed by its own probe."""
    env = {k: v for k, v in os.environ.items() if k not in (ENV_FILE, ENV_RECORDS)}
    env[ENV_FILE] = str(probe_file)
    argv = [sys.executable, "train.py", *[f"--{k}={v}" for k, v in {**XS, "max_iters": steps}.items()]]
    launched = time.monotonic()
    proc = subprocess.Popen(argv, cwd=repo, env=env, stdout=subprocess.DEVNULL)
    first_seen = None
    while first_seen is None and proc.poll() is None:
        if probe_file.exists() and '"event": "step"' in probe_file.read_text():
            first_seen = time.monotonic()
        else:
            time.sleep(0.001)
    if proc.wait() != 0:
        raise RuntimeError(f"bare run failed: {argv}")
    records = [json.loads(line) for line in probe_file.read_text().splitlines()]
    steps_ = [r for r in records if r["event"] == "step"]
    times = [r["dt"] for r in steps_ if r["step"] >= WARMUP]
    return statistics.median(times), first_seen - launched - steps_[0]["dt"]


def contract(steps: int) -> Contract:
    return Contract(
        workload=Workload(entry="train.py", command=["python", "train.py"],
                          args={k: v for k, v in XS.items() if k != "micro_batch_size"},
                          tokens_per_step=XS["batch_size"] * XS["block_size"], seq_len=XS["block_size"],
                          global_batch=XS["batch_size"], seed=1337, warmup_steps=WARMUP,
                          measured_steps=steps - WARMUP, planned_steps=200),
        loss=LossInvariant(compare_steps=1, tolerance=1e-5, numerics_tolerance=1e-3),
        memory=MemoryBudget(budget_bytes=8 * GIB),
        scope=Scope(editable=["train.py"]),
        knobs=[Knob(name="max_iters", role="steps", type="int", default=200, flag="--max_iters"),
               Knob(name="micro_batch_size", role="micro_batch", type="int", default=8, flag="--micro_batch_size")],
    )


def launched(repo: Path, log_dir: Path, steps: int) -> tuple[float, float]:
    result = run_trial(TrialSpec(repo=repo, contract=contract(steps), candidate=Candidate(), check_loss=False,
                                 log_dir=log_dir))
    if not result.ok:
        raise RuntimeError(f"trial failed: {result.status.value}: {result.detail}")
    return result.step_time, result.startup_s


HOOK_LOOP = """
import statistics, sys, time
import torch
sys.path.insert(0, {fixture!r})
from model import GPT, GPTConfig
torch.manual_seed(0)
torch.set_num_threads(1)
cfg = GPTConfig(block_size={block}, vocab_size={vocab}, n_layer={layers}, n_head={heads}, n_embd={embd})
model = GPT(cfg)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randint(0, {vocab}, ({batch}, {block}))
times = []
for i in range({steps}):
    t0 = time.process_time()
    logits, loss = model(x, x)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    times.append(time.process_time() - t0)
print(statistics.median(times[3:]))
"""


def hook_cpu(tmp: Path, steps: int, hooked: bool, fifo: Path) -> float:
    """Median CPU seconds of a training step of the fixture's model, with or without the hooks."""
    code = HOOK_LOOP.format(fixture=str(FIXTURE), block=XS["block_size"], vocab=XS["vocab_size"],
                            layers=XS["n_layer"], heads=XS["n_head"], embd=XS["n_embd"],
                            batch=XS["batch_size"], steps=steps)
    env = {k: v for k, v in os.environ.items() if k not in (ENV_FILE, ENV_RECORDS)}
    channel = control = None
    if hooked:
        control = StepControl(fifo.parent, steps + 1)  # the loop ends by itself
        channel = RecordChannel(fifo, answer=control.answer)
        env.update(launcher_env(fifo, warmup_steps=0, pythonpath=env.get("PYTHONPATH")))
    try:
        out = subprocess.run([sys.executable, "-c", code], env={**env, "OMP_NUM_THREADS": "1"}, cwd=tmp,
                             capture_output=True, text=True, check=True)
    finally:
        if channel is not None:
            channel.close()
            control.close()
    return float(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=22)
    args = parser.parse_args()
    console = Console(highlight=False)
    runs: dict[str, list[tuple[float, float]]] = {"bare": [], "launcher": []}
    with tempfile.TemporaryDirectory(prefix="infrarsi-bench-") as tmp:
        repo = Path(tmp) / "dense_gpt"
        shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("__pycache__", STATE_DIR))
        for i in range(args.repeats):
            console.print(f"repeat {i + 1}/{args.repeats}…")
            # Alternate which side goes first, so a drift in the machine's load hits both alike.
            order = ("bare", "launcher") if i % 2 == 0 else ("launcher", "bare")
            for side in order:
                if side == "bare":
                    runs[side].append(bare(repo, Path(tmp) / f"probe{i}.jsonl", args.steps))
                else:
                    runs[side].append(launched(repo, Path(tmp) / f"trial{i}", args.steps))
        console.print("CPU time per step…")
        cpu = {"bare": [], "launcher": []}
        for i in range(args.repeats):
            for side in (("bare", "launcher") if i % 2 == 0 else ("launcher", "bare")):
                cpu[side].append(hook_cpu(Path(tmp), args.steps, side == "launcher", Path(tmp) / f"hook{i}.fifo"))
    load = open("/proc/loadavg").read().split()[:3]
    table = Table(title=f"launcher overhead: dense_gpt XS, {args.steps} steps ({WARMUP} warm-up), "
                        f"{args.repeats} interleaved repeats; load {' '.join(load)}")
    for column in ("", "bare (probe's clock)", "launcher (InfraRSI's clock)", "difference", "goal"):
        table.add_column(column)
    step = {side: statistics.median(s for s, _ in values) for side, values in runs.items()}
    start = {side: statistics.median(u for _, u in values) for side, values in runs.items()}
    table.add_row("median step", f"{step['bare'] * 1000:.2f} ms", f"{step['launcher'] * 1000:.2f} ms",
                  f"{(step['launcher'] / step['bare'] - 1) * 100:+.2f} %", "≤ 2 %")
    table.add_row("start-up", f"{start['bare']:.2f} s", f"{start['launcher']:.2f} s",
                  f"{start['launcher'] - start['bare']:+.2f} s", "≤ 1 s")
    per_step = {side: statistics.median(values) for side, values in cpu.items()}
    table.add_row("CPU per step (1 thread, in-job)", f"{per_step['bare'] * 1000:.2f} ms", f"{per_step['launcher'] * 1000:.2f} ms",
                  f"{(per_step['launcher'] / per_step['bare'] - 1) * 100:+.2f} %", "≤ 2 %")
    for side, values in runs.items():
        table.add_row(f"runs, {side}", ", ".join(f"{s * 1000:.1f}" for s, _ in values) + " ms",
                      ", ".join(f"{u:.2f}" for _, u in values) + " s", "", "")
    for side, values in cpu.items():
        table.add_row(f"CPU/step runs, {side}", ", ".join(f"{v * 1000:.1f}" for v in values) + " ms", "", "", "")
    console.print(table)


if __name__ == "__main__":
    main()
