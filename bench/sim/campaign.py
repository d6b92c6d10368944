"""Campaigns on the simulated cluster: every method, many seeds, the run stage's loop (docs/sim.md).

    .venv/bin/python -m bench.sim.campaign --space 7b-8xh100 --seeds 50 --gp-seeds 10 --trials 20
    .venv/bin/python -m bench.sim.campaign --seeds 50 --gp-seeds 10 --overhead --transfer   # every space
    .venv/bin/python -m bench.sim.campaign --saved --transfer     # the tables from the runs saved under --out
    .venv/bin/python -m bench.sim.campaign --stack "flash attention" --seeds 20   # a held-out stack
    .venv/bin/python -m bench.sim.campaign --stack perturbed:3 --seeds 20        # the constants perturbed

Per space and method, ``--seeds`` runs of ``--trials`` trials each (the baseline is the first),
each one ``bench.tuners.replay.replay`` against ``bench.sim.backend.SimTable``: InfraRSI's sampler,
Optuna's TPE and GP, random, and a DeepSpeed-autotuning-style ZeRO x micro-batch sweep
(``bench.sim.sweep``), and the priors alone (``PriorsOnlySampler``). Reported: the verified speedup of the pick after the last trial as a share
of the true optimum (enumerated), trials until the pick reaches 95% of it, OOM trials, the
proposals Optuna made outside the valid space (given back, no trial spent), and the simulated
seconds the trials cost; for InfraRSI also its search trials by why they were proposed. Each
space's runs are saved under ``--out``; running some methods replaces only theirs.

``--stack``: the ground truth a held-out ``bench.sim.stack.Stack`` gives (``HELD_OUT`` by name, or
``perturbed:SEED``, the model's constants perturbed), against which every method runs unchanged;
its runs are saved apart. The default, ``in-sample``, is the model whose formulas the priors share.

``--overhead``: InfraRSI's suggestion (``Strategy.propose``) after ``OVERHEAD_TRIALS`` trials of
random valid configurations, after one suggestion at one trial fewer (a run refits from its last
parameters).

``--transfer``: the 7B search on 8xH100 with no bank, with a bank written by ``--bank-runs``
InfraRSI runs on the 70B/64xA100 space (``replay.record_bank``: their findings and promoted picks),
and with a deliberately wrong bank (``wrong_bank``). The three arms draw the same trial noise
(``bench.tuners.common_noise``); a fourth, no bank with its noise drawn anew, shows how far the
noise alone moves a seed's trials to 95 %.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bench.sim.backend import SimTable
from bench.sim.space import SPACES, SimWorkload
from bench.sim.stack import HELD_OUT, IN_SAMPLE, Stack, perturbed
from bench.sim.sweep import SweepStrategy
from bench.tuners import metrics
from bench.tuners.fixture import ROOT
from bench.tuners.methods import experience, strategy
from bench.tuners.replay import BAD_RUN_CV, BAD_RUN_SD, record_bank, replay
from infrarsi.bank import BestConfig, EffectFinding
from infrarsi.priors.types import setting_key
from infrarsi.search.strategy import Strategy

METHODS = ("infrarsi", "tpe", "gp", "random", "deepspeed", "priors")
NOISE_ANEW = "infrarsi, noise anew"
STREAMS = (*METHODS[:5], "infrarsi+bank", "infrarsi+badbank", NOISE_ANEW, *METHODS[5:])
"""A method's index seeds its trials' noise (with the seed)."""
TRANSFER_FROM, TRANSFER_TO = "70b-64xa100", "7b-8xh100"
OVERHEAD_TRIALS = 200
OUT = ROOT / "bench" / "out"


def make_strategy(method: str, table, seed: int, bank_url: str | None = None) -> Strategy:
    """``bench.tuners.methods.strategy``, plus the sweep (the peers' strategy with its own sampler)."""
    if method == "deepspeed":
        return SweepStrategy.like(strategy("random", table, seed))
    return strategy(method, table, seed, bank_url)


def campaign(table: SimTable, method: str, seeds: int, trials: int, bank_url: str | None = None,
             stream: str | None = None) -> list[list[dict]]:
    """``seeds`` runs of ``method``; ``stream`` names whose noise stream the trials draw (default: its own)."""
    index = STREAMS.index(stream or method)
    return [replay(table, method, seed, trials, bank_url, stream=index, make_strategy=make_strategy)
            for seed in range(seeds)]


@dataclass(frozen=True, slots=True)
class Summary:
    """One method on one space, over its runs."""

    method: str
    runs: int
    share: float
    """Median verified speedup after the last trial over the optimum's."""
    share_q25: float
    share_q75: float
    trials_to_90: float
    reached_90: float
    trials_to_95: float
    """Median trials until the pick reaches 95% of the optimum's speedup (inf: most runs never do)."""
    reached_95: float
    oom_mean: float
    oom_max: int
    rejected_mean: float
    """Optuna proposals outside the valid space per run, given back without a trial."""
    crash_mean: float
    sim_hours: float
    """Median simulated hours the run's trials cost."""


def summarize(method: str, runs: list[list[dict]], oracle: float, trials: int) -> Summary:
    shares = [metrics.best_so_far(r, trials)[-1] / oracle for r in runs]
    t90, reached90 = metrics.median_trials_to(runs, 0.90 * oracle)
    t95, reached = metrics.median_trials_to(runs, 0.95 * oracle)
    ooms = [sum(rec["status"] == "oom" for rec in r) for r in runs]
    return Summary(
        method=method, runs=len(runs), share=statistics.median(shares), share_q25=float(np.percentile(shares, 25)),
        share_q75=float(np.percentile(shares, 75)), trials_to_90=t90, reached_90=reached90, trials_to_95=t95,
        reached_95=reached,
        oom_mean=statistics.fmean(ooms), oom_max=max(ooms),
        rejected_mean=statistics.fmean(sum(rec.get("rejected", 0) for rec in r) for r in runs),
        crash_mean=statistics.fmean(sum(rec["status"] == "crash" for rec in r) for r in runs),
        sim_hours=statistics.median(sum(rec["wall_s"] for rec in r) for r in runs) / 3600)


def _n(x: float) -> str:
    return "never" if math.isinf(x) else f"{x:g}"


def summary_table(rows: list[Summary]) -> str:
    lines = ["| method | runs | best found, share of optimum: median (25-75 %) | trials to 90 % (reached) "
             "| trials to 95 % (reached) | OOM trials per run: mean (max) | invalid asks given back per run "
             "| crash trials per run | simulated hours per run |", "|---|--:|---|---|---|---|--:|--:|--:|"]
    for s in rows:
        lines.append(f"| {s.method} | {s.runs} | {s.share:.1%} ({s.share_q25:.1%}-{s.share_q75:.1%}) "
                     f"| {_n(s.trials_to_90)} ({s.reached_90:.0%}) | {_n(s.trials_to_95)} ({s.reached_95:.0%}) "
                     f"| {s.oom_mean:.1f} ({s.oom_max}) "
                     f"| {s.rejected_mean:.1f} | {s.crash_mean:.1f} | {s.sim_hours:.2f} |")
    return "\n".join(lines)


def reasons_table(runs: list[list[dict]]) -> str:
    """Search trials by why the strategy proposed them (the reason's words before any detail in
    brackets): how many per run, and how many of them ran out of memory."""
    by: dict[str, list[int]] = {}
    for rec in (rec for run in runs for rec in run if rec["kind"] == "search"):
        counts = by.setdefault(rec.get("reason", "").split(" (")[0] or "(not recorded)", [0, 0])
        counts[0] += 1
        counts[1] += rec["status"] == "oom"
    lines = ["| proposed as | trials per run | OOM per run | share OOM |", "|---|--:|--:|--:|"]
    lines += [f"| {why} | {n / len(runs):.1f} | {oom / len(runs):.1f} | {oom / n:.0%} |"
              for why, (n, oom) in sorted(by.items(), key=lambda item: -item[1][0])]
    return "\n".join(lines)


# --------------------------------------------------------------------------- suggestion time


@dataclass(frozen=True, slots=True)
class Overhead:
    space: str
    candidates: int
    trials: int
    wall_ms: float
    cpu_ms: float


def overhead(table: SimTable, trials: int = OVERHEAD_TRIALS, repeats: int = 3) -> Overhead:
    """Median wall and CPU time of InfraRSI's suggestion after ``trials`` trials (random valid
    configurations after the baseline, every status as the backend returns it)."""
    rng = np.random.default_rng(0)
    space = table.space
    cands = [space.baseline(), *[c for c in space.sample(rng, trials) if c.key() != space.baseline().key()]]
    history = [table.trial(c, rng, None) for c in cands[:trials]]
    plan = make_strategy("infrarsi", table, 0).prepare(space)
    plan.propose(history[:-1])
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        plan.propose(history)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return Overhead(table.workload.name, space.size(), len(history), 1000 * statistics.median(walls),
                    1000 * statistics.median(cpus))


def overhead_table(rows: list[Overhead]) -> str:
    lines = ["| space | valid candidates | trials | suggestion wall ms | suggestion CPU ms |", "|---|--:|--:|--:|--:|"]
    lines += [f"| {o.space} | {o.candidates} | {o.trials} | {o.wall_ms:.0f} | {o.cpu_ms:.0f} |" for o in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------- transfer


WRONG_SPEEDUP = 1.5
"""The speedup the wrong bank claims for its promoted configuration."""


def wrong_bank(table: SimTable, bank_url: str) -> None:
    """A bank that is wrong about this very workload and machine, the case it is trusted most: each
    one-setting change from the baseline recorded with its true effect on the step reversed, as one
    sure trial (replay's bad-run sd and noise CV), and the slowest configuration that fits recorded
    as the promoted pick at ``WRONG_SPEEDUP``."""
    space, base = table.space, table.space.baseline()
    base_step = table.result(base).step_s
    effects = []
    for knob in table.contract.tunable:
        for value in knob.domain:
            cand = space.with_value(base, knob.name, value) if value != knob.default else None
            if cand is None or not table.result(cand).ok:
                continue
            effects.append(EffectFinding(key=setting_key(knob.name, value), role=knob.role, value=value,
                                         baseline=knob.default, time_log=-math.log(table.result(cand).step_s / base_step),
                                         time_sd=BAD_RUN_SD, n=1, noise_cv=BAD_RUN_CV))
    fitting = [c for c in space.all_candidates() if table.result(c).ok]
    slowest = max(fitting, key=lambda c: table.result(c).step_s)
    bank = experience(table, bank_url)
    bank.bank.record_run(signature=bank.signature, hardware_id=table.hardware.id, hardware=table.hardware.describe(),
                         effects=effects, best=[BestConfig(candidate=slowest, speedup=WRONG_SPEEDUP,
                                                           interval=(WRONG_SPEEDUP, WRONG_SPEEDUP))])
    bank.bank.close()


def transfer(seeds: int, trials: int, bank_runs: int, tmp: Path,
             no_bank: list[list[dict]] | None = None) -> dict[str, list[list[dict]]]:
    """The arms of the transfer experiment on ``TRANSFER_TO`` (``no_bank``: its InfraRSI campaign
    when already run, which draws the same noise)."""
    source, target = SimTable(SPACES[TRANSFER_FROM]), SimTable(SPACES[TRANSFER_TO])
    good, bad = f"sqlite:///{tmp}/transfer.db", f"sqlite:///{tmp}/wrong.db"
    for i in range(bank_runs):
        record_bank(source, good, 1000 + i, trials)
    wrong_bank(target, bad)
    return {"infrarsi (no bank)": no_bank or campaign(target, "infrarsi", seeds, trials),
            f"infrarsi + bank of {bank_runs} runs on {TRANSFER_FROM}": campaign(
                target, "infrarsi+bank", seeds, trials, good, stream="infrarsi"),
            "infrarsi + wrong bank": campaign(target, "infrarsi+badbank", seeds, trials, bad, stream="infrarsi"),
            "infrarsi (no bank), its noise drawn anew": campaign(target, "infrarsi", seeds, trials, stream=NOISE_ANEW)}


def paired_extra(arm: list[list[dict]], none: list[list[dict]], target: float) -> tuple[float, float]:
    """Median and largest extra trials to ``target`` of ``arm`` over no bank, seed by seed (a run
    that never reaches it counts as one trial past the budget)."""
    def count(run: list[dict]) -> float:
        return min(metrics.trials_to(run, target), len(run) + 1.0)

    extra = [count(a) - count(b) for a, b in zip(arm, none, strict=True)]
    return statistics.median(extra), max(extra)


def transfer_table(arms: dict[str, list[list[dict]]], oracle: float, trials: int) -> str:
    none = next(iter(arms.values()))
    lines = ["| arm | runs | best found, share of optimum: median | trials to 95 % (reached) "
             "| extra trials to 95 % over no bank, per seed: median (max) | OOM trials per run: mean |",
             "|---|--:|--:|---|---|--:|"]
    for name, runs in arms.items():
        s = summarize(name, runs, oracle, trials)
        med, worst = paired_extra(runs, none, 0.95 * oracle)
        lines.append(f"| {name} | {s.runs} | {s.share:.1%} | {_n(s.trials_to_95)} ({s.reached_95:.0%}) "
                     f"| {med:+g} ({worst:+g}) | {s.oom_mean:.1f} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def stack_named(name: str) -> Stack:
    """``in-sample``, a ``HELD_OUT`` stack's name, or ``perturbed:SEED`` (optionally ``NAME,
    perturbed:SEED``: a held-out stack with its constants perturbed too)."""
    base, _, seed = name.partition("perturbed:")
    base = base.rstrip(", ")
    stack = IN_SAMPLE if base in ("", IN_SAMPLE.name) else HELD_OUT[base]
    return perturbed(int(seed), stack) if seed else stack


def workload(name: str, stack: Stack) -> SimWorkload:
    return SPACES[name] if stack is IN_SAMPLE else replace(SPACES[name], stack=stack)


def _spaces(args: argparse.Namespace) -> dict[str, dict[str, list[list[dict]]]]:
    """Every space's campaigns: run (and saved under ``--out``), or read back with ``--saved``."""
    done = {}
    stack = stack_named(args.stack)
    suffix = "" if stack is IN_SAMPLE else "_" + "".join(c if c.isalnum() else "-" for c in args.stack)
    for name in args.space or list(SPACES):
        table = SimTable(workload(name, stack))
        key, oracle = table.oracle()
        path = args.out / f"sim_{name}{suffix}.json"
        if args.saved:
            runs = json.loads(path.read_text())["runs"]
        else:
            runs = {}
            for method in args.methods.split(","):
                started = time.perf_counter()
                seeds = args.gp_seeds if method == "gp" and args.gp_seeds else args.seeds
                runs[method] = campaign(table, method, seeds, args.trials)
                print(f"  {name} {method}: {seeds} seeds in {time.perf_counter() - started:.0f} s", flush=True)
            # Methods not run this time keep their saved runs (GP's seeds can be added apart).
            saved = json.loads(path.read_text())["runs"] if path.exists() else {}
            runs = {**saved, **runs}
            path.write_text(json.dumps({"oracle": oracle, "oracle_key": key, "runs": runs}))
        done[name] = runs
        print(f"\n{name} ({stack.name}): {table.space.size()} valid configurations, {table.best.fits} fit; optimum "
              f"{oracle:.3f}x the baseline ({', '.join(table.space.settings(table.candidate(key)))}); "
              f"{args.trials} trials per run\n")
        print(summary_table([summarize(m, r, oracle, args.trials) for m, r in runs.items()]), flush=True)
        if "infrarsi" in runs:
            print(f"\n{name}, infrarsi's search trials by why they were proposed\n")
            print(reasons_table(runs["infrarsi"]), flush=True)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--space", action="append", choices=list(SPACES), help="repeatable; default every space")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--gp-seeds", type=int, default=None, help="seeds for Optuna's GP alone (default --seeds)")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--stack", default=IN_SAMPLE.name,
                        help=f"the ground truth: {IN_SAMPLE.name}, one of {', '.join(HELD_OUT)}, or perturbed:SEED")
    parser.add_argument("--overhead", action="store_true")
    parser.add_argument("--transfer", action="store_true")
    parser.add_argument("--bank-runs", type=int, default=5)
    parser.add_argument("--saved", action="store_true",
                        help="print the tables from the runs an earlier invocation saved under --out")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"(1-minute load average at the start: {os.getloadavg()[0]:.1f})", flush=True)
    done = _spaces(args)
    if args.overhead and not args.saved:
        print("\n" + overhead_table([overhead(SimTable(SPACES[name])) for name in done]), flush=True)
    if args.transfer:
        target = SimTable(SPACES[TRANSFER_TO])
        path = args.out / "sim_transfer.json"
        if args.saved:
            arms = json.loads(path.read_text())["arms"]
        else:
            previous = done.get(TRANSFER_TO, {}).get("infrarsi")
            with tempfile.TemporaryDirectory() as tmp:
                arms = transfer(args.seeds, args.trials, args.bank_runs, Path(tmp),
                                previous if previous and len(previous) == args.seeds else None)
            path.write_text(json.dumps({"oracle": target.best.speedup, "arms": arms}))
        print(f"\ntransfer to {TRANSFER_TO}, optimum {target.best.speedup:.3f}x\n")
        print(transfer_table(arms, target.best.speedup, args.trials), flush=True)


if __name__ == "__main__":
    main()
