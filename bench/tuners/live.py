"""Live: every method runs the real run stage's search (real trials) on a fixture.

    .venv/bin/python -m bench.tuners.live dense_gpt [--methods infrarsi,tpe] [--seeds 0,1,2] [--trials 20] [--resume]

The fixture is prepared once as for the table (git copy, budget, the benchmark's reduced space:
bench/tuners/fixture.py) and doctor'ed once; each (method, seed) runs
``infrarsi.stages.run.run(copy, trials=N, sampler=..., seed=s, verify=False)`` on its own copy with
a fresh SQLite study: the search alone, real trials through the real runner. ``infrarsi+bank`` gets
a bank filled as in replay (one earlier InfraRSI run's findings on the fixture's measured table).
After each trial the method's pick is replay's (``verified_pick``: of the candidates
re-verification would rerun, ranked as the run stage ranks them, the one with the highest verified
speedup); because the space is the table's, the verified speedup is the table's median over its
repeats, and the oracle is the table's best. Re-verifying every method's pick against the baseline
would cost more machine time than the searches and tell the same. Seeds run in the outer loop, so a
run cut short has every method on its first seeds. Results are written to
bench/out/live_<fixture>.json after every run, with the last commit of the code that run depends on;
``--resume`` keeps those of the same commit and skips their (method, seed) pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.tuners import report
from bench.tuners.fixture import ROOT, prepare
from bench.tuners.measure_space import DATA
from bench.tuners.methods import METHODS, sampler_of, strategy
from bench.tuners.replay import DOCS, OUT, record_bad_bank, record_bank, verified_pick
from bench.tuners.table import Table
from infrarsi.contract import load_contract
from infrarsi.experiment.store import TrialStore
from infrarsi.search.space import SearchSpace
from infrarsi.stages.doctor import doctor
from infrarsi.stages.run import run

COUNTED = ("baseline", "validation", "search")
"""Trial kinds that spend the trial budget (re-verification comes after it)."""

INFRARSI_ONLY = ("samplers", "time_model", "memory_model", "acquisition", "crash_model", "gp", "truncated",
                 "prior_check", "calibration")
"""``infrarsi/search`` modules only InfraRSI's sampler searches with (for a peer's run they only
write the report's checks), so a change to them leaves the peers' runs measured."""


def code_commit(method: str) -> str:
    """The last commit of the code a method's run depends on: committing results and docs later,
    or changing InfraRSI's own models, keeps --resume of the peers working."""
    paths = ["infrarsi", "bench/tuners"]
    if sampler_of(method)[0] != "infrarsi":
        paths += [f":(exclude)infrarsi/search/{name}.py" for name in INFRARSI_ONLY]
    return subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h", "--", *paths],
                          capture_output=True, text=True, check=True).stdout.strip()


def records_of(repo: Path, storage: str, result, method: str, seed: int, bank: str, table: Table) -> list[dict]:
    """Per budgeted trial, in the study's order: status, cost, and the method's pick after it, by
    replay's rule (``verified_pick``: what re-verification would promote, at its table speedup)."""
    rank = strategy(method, table, seed, bank)
    validated = [c.name for c in result.patch_checks if c.status == "validated"]
    rank = rank.prepare(SearchSpace.from_contract(table.contract, validated))
    history, out = [], []
    for stored in TrialStore.open(load_contract(repo), [], storage_url=storage).trials():
        history.append(stored.result)  # every kind is data for the models' ranking
        if stored.kind not in COUNTED:
            continue
        pick = verified_pick(rank, history, table)
        out.append({"kind": stored.kind, "status": stored.result.status.value, "wall_s": stored.result.wall_s,
                    "key": stored.result.candidate.key(), "pick": pick, "speedup": table.speedup(pick)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fixture")
    parser.add_argument("--methods", default=",".join(m for m in METHODS if m != "infrarsi+badbank"))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--resume", action="store_true", help="keep earlier results of the same code, skip their runs")
    args = parser.parse_args()
    table = Table.load(DATA / f"{args.fixture}_space.json")
    out_path = OUT / f"live_{args.fixture}.json"
    OUT.mkdir(parents=True, exist_ok=True)
    commits = {method: code_commit(method) for method in METHODS}
    done = [e for e in json.loads(out_path.read_text()) if e.get("commit") == commits.get(e["method"])] \
        if args.resume and out_path.exists() else []
    todo = [(method, seed) for seed in (int(s) for s in args.seeds.split(",")) for method in args.methods.split(",")
            if not any(e["method"] == method and e["seed"] == seed for e in done)]
    with tempfile.TemporaryDirectory(prefix="infrarsi-live-") as tmp:
        if todo:
            prepared = prepare(args.fixture, Path(tmp) / "prepared", table.data.get("pins"))
            if not (measured := doctor(prepared, repeats=2)).ok:
                raise SystemExit(f"doctor: {measured.message}")
        for method, seed in todo:
            repo = Path(tmp) / f"{method}-{seed}" / args.fixture
            shutil.copytree(prepared, repo)
            sampler, use_bank = sampler_of(method)
            bank = f"sqlite:///{tmp}/bank-{method}-{seed}.db"
            if method.endswith("+badbank"):
                record_bad_bank(table, bank)
            elif use_bank:
                record_bank(table, bank, 1000 + seed, args.trials)
            load = os.getloadavg()[0]
            started = time.perf_counter()
            storage = f"sqlite:///{repo.parent}/study.db"
            result = run(repo, trials=args.trials, sampler=sampler, seed=seed, use_bank=use_bank, bank_url=bank,
                         storage=storage, verify=False)
            done.append({"method": method, "seed": seed, "commit": commits[method], "load1_start": load,
                         "load1_end": os.getloadavg()[0], "wall_s": time.perf_counter() - started,
                         "status": result.status, "message": result.message,
                         "search_ended": result.search_ended,
                         "records": records_of(repo, storage, result, method, seed, bank, table)})
            out_path.write_text(json.dumps(done, indent=1))
            print(f"{args.fixture} {method} seed {seed}: {result.message} "
                  f"({time.perf_counter() - started:.0f} s, load {load:.1f})", flush=True)
    print_summary(done, table, args.trials, args.fixture)


def print_summary(done: list[dict], table: Table, trials: int, fixture: str) -> None:
    runs: dict[str, list[list[dict]]] = {}
    for entry in done:
        runs.setdefault(entry["method"], []).append(entry["records"])
    _, oracle = table.oracle()
    print(report.summary_table(runs, oracle, trials))
    print(report.waste_table(runs))
    report.plot(runs, oracle, trials, DOCS / f"live_{fixture}.png", f"live: {fixture}")


if __name__ == "__main__":
    main()
