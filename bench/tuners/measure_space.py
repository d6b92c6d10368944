"""Measure every configuration of a fixture's reduced space for real, with repeats, into a table.

    .venv/bin/python -m bench.tuners.measure_space dense_gpt [--repeats 2] [--quiet-cores 0.5]

The fixture is copied into a temporary git repo, init'ed with its memory budget, its contract cut
to the benchmark's space (bench/tuners/fixture.py), and doctor'ed (reference losses, noise). Then
every configuration runs through ``run_trial`` exactly as the run stage runs a search trial
(budget enforced, same timeout rule, numerics-by-design for bf16) but never aborted early, so the
table holds whole runs; OOMs, crashes and numerics failures are rows like any other. Repeats run
in rounds (all configurations, then all again, in a new random order) so slow drifts in
background load spread over all of them. Configurations the space marks short (bf16: ~20x slower
on this CPU) run once, with 3 measured steps: any search aborts them after 3 steps anyway.

Before every trial the harness waits until the other processes on the machine use less than
``--quiet-cores`` cores (sampled over 2 s while it is idle itself), at most ``--max-wait-s``; each
run records that load, the 1-minute load average and whether it ran quiet. Writes
``bench/data/<fixture>_space.json`` with the machine's fingerprint and how it was made, after every
trial (``"complete": false`` until the last); ``--resume`` continues an unfinished table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

from bench.tuners.fixture import ROOT, SPACES, budget_mib, prepare
from infrarsi.byte_units import MIB
from infrarsi.contract import contract_path, require_intact
from infrarsi.hardware import fingerprint
from infrarsi.patches.numerics import numerics_by_design
from infrarsi.runner.abort import MIN_STEPS
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.search.space import SearchSpace
from infrarsi.stages.doctor import doctor
from infrarsi.trials import Candidate

DATA = ROOT / "bench" / "data"
MIN_TIMEOUT_S = 180.0
"""The run stage's timeout rule: max(180 s, 6 x the baseline's wall time)."""


def others_cores(sample_s: float = 2.0) -> float:
    """Cores busy with other processes, sampled while this process is idle."""
    return psutil.cpu_percent(interval=sample_s) / 100 * psutil.cpu_count()


def wait_quiet(limit: float, max_wait_s: float) -> dict:
    started = time.monotonic()
    while True:
        busy = others_cores()
        waited = time.monotonic() - started
        if busy < limit or waited > max_wait_s:
            return {"others_cores": round(busy, 2), "load1": round(os.getloadavg()[0], 2),
                    "waited_s": round(waited, 1), "quiet": busy < limit}
        time.sleep(10)


def is_short(candidate, fixture: str) -> bool:
    short = SPACES[fixture].short_values or {}
    return any(candidate.knobs.get(k) in values for k, values in short.items())


def run_row(result, conditions: dict) -> dict:
    return {"status": result.status.value, "step_times": result.step_times, "warmup_times": result.warmup_times,
            "startup_s": result.startup_s, "wall_s": result.wall_s, "peak_bytes": result.peak_bytes,
            "detail": result.detail[-300:], **conditions}


def fresh_table(args, repo: Path, report, contract, patches: list[str], cands) -> dict:
    return {
        "fixture": args.fixture,
        "complete": False,
        "made": {"command": " ".join([Path(sys.executable).name, "-m", "bench.tuners.measure_space", *sys.argv[1:]]),
                 "started": dt.datetime.now().isoformat(timespec="seconds"), "finished": None,
                 "repeats": args.repeats, "short_steps": contract.workload.warmup_steps + MIN_STEPS,
                 "quiet_cores": args.quiet_cores,
                 "how": "every configuration through infrarsi.runner.run_trial, never aborted early; "
                        "repeats in rounds of random order; short rows once with 3 measured steps"},
        "hardware": fingerprint().to_dict(),
        "budget_mib": budget_mib(args.fixture),
        "patches": patches,
        "model_facts": {},
        "contract_toml": contract_path(repo).read_text(),
        "doctor": {"noise": report.noise.to_dict(), "baseline_wall_s": [r.wall_s for r in report.runs]},
        "timeout_s": max(MIN_TIMEOUT_S, 6 * max(r.wall_s for r in report.runs)),
        "rows": [{"candidate": c.to_dict(), "short": is_short(c, args.fixture), "runs": []} for c in cands],
    }


def save(table: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=1))
    tmp.replace(out)


def rows_markdown(table: dict) -> str:
    """Every measured run of a table, as the docs show it."""
    lines = ["| configuration | run | status | median step s | wall s | peak MiB | others' cores | load1 | quiet |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in table["rows"]:
        cand = Candidate.from_dict(row["candidate"])
        for i, run in enumerate(row["runs"]):
            name = ", ".join([*(f"{k}={v}" for k, v in cand.knobs.items()), *cand.patches])
            step = f"{statistics.median(run['step_times']):.3f}" if run["step_times"] else "-"
            peak = f"{run['peak_bytes'] / MIB:.0f}" if run["peak_bytes"] else "-"
            lines.append(f"| {name} | {i + 1} | {run['status']} | {step} | {run['wall_s']:.1f} | {peak} "
                         f"| {run['others_cores']:.2f} | {run['load1']:.1f} | {'yes' if run['quiet'] else 'no'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fixture", choices=sorted(SPACES))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quiet-cores", type=float, default=0.5)
    parser.add_argument("--max-wait-s", type=float, default=120.0)
    parser.add_argument("--resume", action="store_true", help="continue the table at --out (same contract)")
    parser.add_argument("--pin", action="append", default=[], metavar="KNOB=DEFAULT",
                        help="leave a knob of the space at its default (a smaller table)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--show", action="store_true", help="print the table's measured runs and exit")
    args = parser.parse_args()
    out = args.out or DATA / f"{args.fixture}_space.json"
    if args.show:
        print(rows_markdown(json.loads(out.read_text())))
        return
    pins = dict(p.split("=", 1) for p in args.pin)
    if args.resume:
        pins = json.loads(out.read_text()).get("pins", {})
    with tempfile.TemporaryDirectory(prefix="infrarsi-bench-") as tmp:
        repo = prepare(args.fixture, Path(tmp), pins)
        if args.resume:
            table = json.loads(out.read_text())
            # The stored contract carries doctor's reference losses: trials are judged as before.
            contract_path(repo).write_text(table["contract_toml"])
            table["made"].setdefault("resumed", []).append(dt.datetime.now().isoformat(timespec="seconds"))
        contract = require_intact(repo)
        patches = SPACES[args.fixture].patches
        cands = SearchSpace.from_contract(contract, patches).all_candidates()
        if not args.resume:
            wait_quiet(args.quiet_cores, args.max_wait_s)
            measured = doctor(repo, repeats=2)
            if measured.report is None:
                raise SystemExit(f"doctor: {measured.message}")
            table = fresh_table(args, repo, measured.report, contract, patches, cands)
            table["pins"] = pins
            contract = require_intact(repo)
            table["contract_toml"] = contract_path(repo).read_text()
            save(table, out)
        rows = {Candidate.from_dict(r["candidate"]).key(): r for r in table["rows"]}
        space = SearchSpace.from_contract(contract, patches)
        rng = np.random.default_rng(len(table["made"].get("resumed", [])))
        print(f"{args.fixture}: {len(cands)} configurations, budget {table['budget_mib']} MiB", flush=True)
        for round_ in range(table["made"]["repeats"]):
            for i in rng.permutation(len(cands)):
                cand = cands[i]
                row = rows[cand.key()]
                if len(row["runs"]) > round_ or (row["short"] and round_ > 0):
                    continue
                conditions = wait_quiet(args.quiet_cores, args.max_wait_s)
                result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=cand, timeout_s=table["timeout_s"],
                                             steps=table["made"]["short_steps"] if row["short"] else None,
                                             numerics_by_design=numerics_by_design(cand),
                                             log_dir=Path(tmp) / "logs" / f"{round_}-{i}"))
                row["runs"].append(run_row(result, conditions))
                table["model_facts"] = table["model_facts"] or dict(result.model_facts)
                save(table, out)
                step = f"{result.step_time:.3f} s/step" if result.step_time else result.detail[:60]
                print(f"round {round_} {', '.join(space.settings(cand)) or 'baseline':<62} "
                      f"{result.status.value:<12} {step:<16} wall {result.wall_s:5.1f} s  "
                      f"others {conditions['others_cores']:.2f} cores, load {conditions['load1']:.1f}", flush=True)
    table["complete"] = True
    table["made"]["finished"] = dt.datetime.now().isoformat(timespec="seconds")
    save(table, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
