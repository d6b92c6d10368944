"""Experience-bank transfer across hardware: trials to reach a speedup with and without a bank
that another machine filled.

The other machine is this one restricted to one core (``taskset -c 0``): the hardware
fingerprint counts the cores a process may use, so to the bank it is different hardware. Three
``infrarsi optimize COPY faster --json`` runs on fresh git copies of the fixture, each with its
own ``INFRARSI_BANK_URL``:

1. source: one core, bank A (its findings are recorded there at the end of its run);
2. target with bank: all cores, bank A (seeds and priors from the one-core machine);
3. target without bank: all cores, an empty bank B.

For the two target runs: after each counted trial (baseline, validation, search), the projected
job speedup of the best measured trial so far over the baseline trial; the trials each needs to
reach 95% of the speedup the run without a bank ends with; seconds spent on failed trials.
One seed each: single-trial speedups carry the machine's run-to-run noise.

    .venv/bin/python -m bench.transfer [dense_gpt] [--json bench/out/transfer.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.tuners.fixture import git_copy

ROOT = Path(__file__).resolve().parents[1]
INFRARSI = str(ROOT / ".venv" / "bin" / "infrarsi")
COUNTED = ("baseline", "validation", "search")
REACH = 0.95


def optimize(repo: Path, bank_url: str, *, one_core: bool) -> dict:
    argv = [INFRARSI, "optimize", str(repo), "faster", "--json"]
    if one_core:
        argv = ["taskset", "-c", "0", *argv]
    done = subprocess.run(argv, env={**os.environ, "INFRARSI_BANK_URL": bank_url}, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def curve(run: dict) -> list[float]:
    """Best-so-far projected job speedup over the baseline trial, after each counted trial."""
    trials = [t for t in run["trials"] if t["kind"] in COUNTED]
    base = next(t["job_s"] for t in trials if t["kind"] == "baseline")
    best, out = base, []
    for t in trials:
        if t["status"] == "ok" and t["job_s"]:
            best = min(best, t["job_s"])
        out.append(base / best)
    return out


def first_reaching(values: list[float], target: float) -> int | None:
    return next((i + 1 for i, v in enumerate(values) if v >= target), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fixture", nargs="?", default="dense_gpt")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "out" / "transfer.json")
    args = parser.parse_args()
    console = Console(width=160)
    with tempfile.TemporaryDirectory(prefix="transfer-") as tmp:
        tmp = Path(tmp)
        bank_a, bank_b = f"sqlite:///{tmp}/bank_a.db", f"sqlite:///{tmp}/bank_b.db"
        runs = {}
        for name, bank, one_core in (("source (1 core)", bank_a, True), ("target, bank from 1 core", bank_a, False),
                                     ("target, no bank", bank_b, False)):
            console.print(f"running {name} …")
            repo = git_copy(args.fixture, tmp / f"run{len(runs)}")
            runs[name] = optimize(repo, bank, one_core=one_core)["run"]
    with_bank, without = runs["target, bank from 1 core"], runs["target, no bank"]
    target = REACH * curve(without)[-1]
    table = Table(title=f"Bank transfer on {args.fixture}: trials to reach {REACH:.0%} of the no-bank run's "
                        f"final speedup ({target:.3f}x)")
    for col in ("run", "trials counted", "trials to reach", "final best speedup", "failed-trial s", "all trial s",
                "promoted"):
        table.add_column(col)
    rows = []
    for name, run in runs.items():
        values = curve(run)
        failed = sum(t["wall_s"] for t in run["trials"] if t["status"] != "ok")
        promoted = run["promoted"]["job_speedup"] if run.get("promoted") else None
        row = {"run": name, "curve": values, "reach": first_reaching(values, target) if "target" in name else None,
               "failed_s": failed, "spent_s": run["spent_s"], "promoted": promoted,
               "search_ended": run.get("search_ended", ""), "priors_source": run.get("priors_source", ""),
               "reasons": [t["reason"] for t in run["trials"] if t["kind"] in COUNTED]}
        rows.append(row)
        table.add_row(name, str(len(values)), str(row["reach"] or "-"), f"{values[-1]:.3f}x", f"{failed:.0f}",
                      f"{run['spent_s']:.0f}", f"{promoted[0]:.2f}x [{promoted[1]:.2f}, {promoted[2]:.2f}]"
                      if promoted else "-")
    console.print(table)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"fixture": args.fixture, "target": target, "runs": rows}, indent=2))
    console.print(f"written {args.json}")


if __name__ == "__main__":
    main()
