"""Experience-bank transfer across hardware: trials to reach the best configuration with and
without a bank that other hardware filled.

Source, live. ``infrarsi doctor`` and ``infrarsi run`` on a git copy of the fixture prepared as for
its measured table (the benchmark's reduced space, bench/tuners/fixture.py), on one core
(``taskset -c 0``): the hardware fingerprint counts the cores a process may use, so to the bank it
is other hardware. At the end of its run its findings (setting effects, patch verdicts, the
promoted configuration) go to bank A, as on any run.

Target, replayed. The fixture's table, measured on every core of this machine, is the target
hardware. InfraRSI runs on it 50 times (bench/tuners/replay.py: each trial drawn from the table's
measured runs) with no bank; with bank A (seeds and priors from one core); and, for scale, with a
bank from one earlier run on the target itself (the same-hardware best case, as replay's
``infrarsi+bank``). Reported per arm, over the seeds: trials to 90 % / 95 % of the table's best,
trials run, the final share of the best, and the seconds spent on failed trials.

One live run per arm could not show a transfer: on this machine one trial of a configuration
differs from the next by up to 30 %, more than most gains at stake. Replaying the target keeps the
trials real (measured on the target) and the comparison over many seeds.

    .venv/bin/python -m bench.transfer [moe_gpt] [--seeds 50] [--source-trials 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from bench.tuners import report
from bench.tuners.fixture import prepare
from bench.tuners.measure_space import DATA
from bench.tuners.replay import OUT, replay
from bench.tuners.table import Table

ROOT = Path(__file__).resolve().parents[1]
INFRARSI = str(ROOT / ".venv" / "bin" / "infrarsi")
NO_BANK, OTHER, SAME = "no bank", "bank from 1 core", "bank from this hardware"


def on_one_core(argv: list[str], bank_url: str) -> dict:
    done = subprocess.run(["taskset", "-c", "0", *argv, "--json"], env={**os.environ, "INFRARSI_BANK_URL": bank_url},
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} on one core failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def source(table: Table, fixture: str, tmp: Path, bank_url: str, trials: int) -> dict:
    """The one-core run that fills the bank; its summary as the run stage returns it."""
    repo = prepare(fixture, tmp / "source", table.data.get("pins"))
    on_one_core([INFRARSI, "doctor", str(repo)], bank_url)
    return on_one_core([INFRARSI, "run", str(repo), "--trials", str(trials)], bank_url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fixture", nargs="?", default="moe_gpt")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--source-trials", type=int, default=20)
    parser.add_argument("--json", type=Path, default=OUT / "transfer.json")
    args = parser.parse_args()
    table = Table.load(DATA / f"{args.fixture}_space.json")
    with tempfile.TemporaryDirectory(prefix="transfer-") as tmp:
        bank_a = f"sqlite:///{tmp}/bank_a.db"
        print(f"source: {args.fixture} on one core, {args.source_trials} trials …", flush=True)
        ran = source(table, args.fixture, Path(tmp), bank_a, args.source_trials)
        promoted = ran["promoted"]["candidate"] if ran.get("promoted") else None
        print(f"source: {ran['message']} ({ran['search_ended']}); promoted {promoted}", flush=True)
        runs = {
            NO_BANK: [replay(table, "infrarsi", seed, args.trials) for seed in range(args.seeds)],
            OTHER: [replay(table, "infrarsi+bank", seed, args.trials, bank_url=bank_a) for seed in range(args.seeds)],
            SAME: [replay(table, "infrarsi+bank", seed, args.trials) for seed in range(args.seeds)],
        }
    _, oracle = table.oracle()
    print(f"\ntarget: {args.fixture}'s table ({table.hardware.id}), {args.seeds} seeds; oracle {oracle:.3f}x")
    print(report.summary_table(runs, oracle, args.trials))
    print(report.waste_table(runs))
    source_summary = {key: ran.get(key) for key in ("status", "message", "search_ended", "priors_source", "spent_s",
                                                    "promoted", "prior_checks")}
    source_summary["trials"] = [{k: t[k] for k in ("kind", "status", "wall_s", "candidate", "reason")}
                                for t in ran["trials"]]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"fixture": args.fixture, "oracle": oracle, "target_hardware": table.hardware.id,
                                     "source": source_summary, "runs": runs}, indent=1))
    print(f"written {args.json}")


if __name__ == "__main__":
    main()
