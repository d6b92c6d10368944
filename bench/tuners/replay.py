"""Replay: every method on a measured table, many seeds, the run stage's loop with the table as runner.

    .venv/bin/python -m bench.tuners.replay bench/data/dense_gpt_space.json [--seeds 50] [--gp-seeds 10] [--trials 20]
    .venv/bin/python -m bench.tuners.replay --overhead [--seeds 2]

A replayed run does what ``infrarsi.stages.run`` does: the baseline, each patch alone on the
baseline (validation), then search trials with the abort bound at 1.5x the incumbent's step time,
every trial told to an Optuna study through ``TrialStore`` as the run stage records it (TPE/GP
mirror it in their own study, ``infrarsi.search.optuna_samplers``), 20 trials in all, fewer where a method stops by itself. A trial's result is one
of the configuration's measured runs (bench/tuners/table.py). After each trial the method's pick
is what the run stage's re-verification would promote from the candidates it re-verifies
(``Strategy.top_candidates`` ranked ahead of the baseline: InfraRSI's model ranking, the peers'
best measured runs): the one whose *verified* speedup, the table's median speedup for
it (1.0 if it ever failed), is highest.

``infrarsi+bank``: before each seed the experience bank holds the findings of one earlier
InfraRSI run (no bank, another seed) on the same table, recorded by ``Experience.record``:
the same job tuned again on the same machine, the best case for the bank.

``infrarsi+badbank``: the bank holds the findings of a bad run (``record_bad_bank``): for each
setting, the slowest measured run of the configuration that changes only that setting against the
baseline's fastest run, as one trial recorded with the ±1% sd today's ``Experience.record`` gives a
ridge through few trials, and a run noise CV of 1% (its doctor saw a quiet machine; the trials
did not). The bank is there to save trials; this arm checks it cannot cost any.

``--overhead``: the wall and CPU time of each method's suggestion (its sampler's ask) at 25, 50
and 100 trials, on the synthetic 7,680-candidate dense space of bench/suggest_overhead.py (a
measured table is too small to reach 100 distinct trials).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import optuna

from bench.tuners import report
from bench.tuners.common_noise import CommonNoise
from bench.tuners.fixture import ROOT
from bench.tuners.methods import METHODS, experience, strategy
from bench.tuners.table import Table
from infrarsi.bank import EffectFinding
from infrarsi.contract import VerifyPolicy
from infrarsi.experiment.search_loop import abort_bound
from infrarsi.experiment.store import TrialStore
from infrarsi.hardware import fingerprint
from infrarsi.priors.types import setting_key
from infrarsi.records import PatchCheck, Verdict
from infrarsi.search.optuna_samplers import OptunaSampler
from infrarsi.search.space import SearchSpace
from infrarsi.trials import Candidate, TrialResult

OUT = ROOT / "bench" / "out"
DOCS = ROOT / "docs" / "benchmarks"


class _Run:
    """One method, one seed: the run stage's search loop against ``execute``.

    ``table`` is the runner: a measured ``Table`` or anything with its interface (``contract``,
    ``patches``, ``space``, ``hardware``, ``data``, ``search_space``, ``speedup``, ``candidate``),
    such as the simulated cluster of ``bench.sim.backend``."""

    def __init__(self, table, method: str, seed: int, execute, bank_url: str | None = None, *, rank: bool = True,
                 make_strategy=strategy):
        """``rank``: find the method's pick after every trial (off when only suggestions are timed);
        ``make_strategy(method, table, seed, bank_url)`` builds the method's ``Strategy``."""
        self.rank = rank
        self.table = table
        self.floor = table.data.get("doctor", {}).get("noise", {}).get("min_speedup", 1.0)
        """Doctor's one-run noise floor as the table measured it: it widens the abort bound, as in the run."""
        self.strategy = make_strategy(method, table, seed, bank_url)
        # As the run stage's store: every candidate given, the study's own sampler never asked.
        self.store = TrialStore(optuna.create_study(direction="minimize"), table.contract, table.patches)
        self.execute_result = execute
        self.history: list[TrialResult] = []
        self.records: list[dict] = []

    def execute(self, cand: Candidate, kind: str, abort: float | None = None,
                asked: tuple[float, float] | None = None, reason: str = ""):
        """``asked``: (wall, CPU) clocks when the proposal was asked for, so the suggestion's cost
        covers the strategy's propose; ``reason``: why the strategy proposed the candidate (recorded)."""
        wall, cpu = asked if asked is not None else (time.perf_counter(), time.process_time())
        trial = self.store.begin(cand, kind)
        # An Optuna sampler asks over each knob's whole domain and gives a constrained space's
        # invalid points back (``max_rejected``), as its users reject them: counted here.
        sampler = self.strategy.sampler if kind == "search" else None  # a search trial's strategy is prepared
        rejected = sampler.rejected if isinstance(sampler, OptunaSampler) else 0
        cand = self.store.candidate_of(trial)
        ask_s = time.perf_counter() - wall
        ask_cpu = time.process_time() - cpu
        result = self.execute_result(cand, abort)
        self.store.finish(trial, result)
        self.history.append(result)
        pick = verified_pick(self.strategy, self.history, self.table) if self.rank else None
        self.records.append({"kind": kind, "status": result.status.value, "wall_s": result.wall_s,
                             "key": cand.key(), "pick": pick, "rejected": rejected, "reason": reason,
                             "ask_s": ask_s if kind == "search" else None, "ask_cpu_s": ask_cpu})
        return result

    def run(self, trials: int) -> list[dict]:
        base = self.strategy.baseline()
        self.execute(base, "baseline")
        self.checks = [PatchCheck(name=p, status=self.execute(Candidate(dict(base.knobs), (p,)), "validation").status.value,
                                  reason="", cost_s=0.0) for p in self.table.patches]
        validated = [c.name for c in self.checks if c.status == "ok"]
        self.strategy = self.strategy.prepare(self.table.search_space(validated), self.table.patches)
        while len(self.records) < trials:
            asked = (time.perf_counter(), time.process_time())
            proposal = self.strategy.propose(self.history)
            if proposal is None:
                break
            self.execute(proposal.candidate, "search", abort_bound(self.history, self.floor), asked, proposal.reason)
        return self.records


def verified_pick(strategy, history: list[TrialResult], table) -> str | None:
    """What re-verification would promote after ``history``: of the candidates the run stage
    re-verifies (``Strategy.to_verify``: the contract's ``[verify] candidates``, 2 by default, the
    method ranks ahead of the baseline, plus the ones measured faster beyond doctor's floor), the one
    with the highest verified (table) speedup. Before the search starts every method has only measured runs to rank (no sampler yet)."""
    return max((c.key() for c in strategy.to_verify(history, VerifyPolicy().candidates)), key=table.speedup, default=None)


def record_bank(table, bank_url: str, seed: int, trials: int) -> None:
    """Fill the bank with one earlier InfraRSI run's findings, as the run stage records them."""
    noise = CommonNoise(seed, 99)
    earlier = _Run(table, "infrarsi", seed, lambda c, a: table.trial(c, noise(c), a))
    records = earlier.run(trials)
    pick = next((r["pick"] for r in reversed(records) if r["pick"]), None)
    promoted = None
    if pick and table.speedup(pick) > 1.0:
        # Re-verification is not replayed: the pick is recorded at its table speedup.
        s = table.speedup(pick)
        promoted = Verdict(candidate=table.candidate(pick), promoted=True, reason="replay", job_speedup=(s, s, s))
    checks = [PatchCheck(name=c.name, status="validated" if c.status == "ok" else c.status, reason="", cost_s=0.0)
              for c in earlier.checks]
    plan = earlier.strategy
    experience(table, bank_url).record(SimpleNamespace(patch_checks=checks, promoted=promoted), earlier.history,
                                       contract=table.contract, space=plan.space, priors=plan.priors,
                                       own=plan.own_priors, noise_cv=plan.noise_cv)


BAD_RUN_SD = 0.01
"""The sd a bad run's finding claims: what the ridge through a handful of trials reports."""
BAD_RUN_CV = 0.01
"""The run noise its doctor measured: a quiet machine (the disturbance came later)."""


def bad_findings(table) -> list[EffectFinding]:
    """A bad run's findings: each setting's slowest measured run against the baseline's fastest."""
    space, contract = table.space, table.contract
    base = space.baseline()
    fastest_base = min(r.step_time for r in table.rows[base.key()].runs if r.ok and r.step_time)
    one_change = [(k.name, v, space.with_value(base, k.name, v)) for k in contract.tunable for v in k.domain
                  if v != k.default] + [(None, p, Candidate(dict(base.knobs), (p,))) for p in table.patches]
    out = []
    for name, value, cand in one_change:
        if cand is None or not space.is_valid(cand) or cand.key() not in table.rows:
            continue
        steps = [r.step_time for r in table.rows[cand.key()].runs if r.ok and r.step_time]
        if not steps:
            continue  # it never ran ok: a bad run has no step time to say anything with either
        key = f"patch:{value}" if name is None else setting_key(name, value)
        if key not in space.setting_keys:
            continue
        role = "patch" if name is None else contract.knob(name).role
        out.append(EffectFinding(key=key, role=role, value="on" if name is None else value,
                                 baseline="off" if name is None else contract.knob(name).default,
                                 time_log=math.log(max(steps) / fastest_base), time_sd=BAD_RUN_SD, n=1,
                                 noise_cv=BAD_RUN_CV))
    return out


def record_bad_bank(table, bank_url: str) -> None:
    """Fill the bank with a bad run's findings (``bad_findings``); it promoted nothing."""
    bank = experience(table, bank_url)
    bank.bank.record_run(signature=bank.signature, hardware_id=table.hardware.id,
                         hardware=table.hardware.describe(), effects=bad_findings(table))
    bank.bank.close()


def replay(table, method: str, seed: int, trials: int, bank_url: str | None = None, *,
           stream: int | None = None, make_strategy=strategy) -> list[dict]:
    """One run of ``method`` on the table. A ``+bank`` method reads ``bank_url`` when given (it is
    not written to), else a bank filled by one earlier InfraRSI run on the same table; a
    ``+badbank`` method a bank holding a bad run's findings. ``stream`` seeds the trials' noise
    with the seed (default: the method's index in ``METHODS``), each trial drawing its own (``CommonNoise``)."""
    noise = CommonNoise(seed, METHODS.index(method) if stream is None else stream)
    with tempfile.TemporaryDirectory() as tmp:
        if method.endswith("+bank") and bank_url is None:
            bank_url = f"sqlite:///{tmp}/bank.db"
            record_bank(table, bank_url, 1000 + seed, trials)
        elif method.endswith("+badbank") and bank_url is None:
            bank_url = f"sqlite:///{tmp}/bank.db"
            record_bad_bank(table, bank_url)
        records = _Run(table, method, seed, lambda c, a: table.trial(c, noise(c), a), bank_url,
                       make_strategy=make_strategy).run(trials)
    for rec in records:
        rec["speedup"] = table.speedup(rec["pick"])
    return records


# --------------------------------------------------------------------------- overhead


def overhead(methods: list[str], seeds: int, sizes=(25, 50, 100)) -> dict[str, dict[int, tuple[float, float]]]:
    """Median wall and CPU seconds of the suggestion that starts trial n, for n in ``sizes``."""
    from infrarsi.search.synthetic import (
        DENSE_MEM,
        DENSE_PATCHES,
        DENSE_STARTUP,
        DENSE_TIME,
        Surface,
        contract_with,
        dense_knobs,
    )

    contract = contract_with(dense_knobs())
    space = SearchSpace.from_contract(contract, DENSE_PATCHES)
    fake = SimpleNamespace(contract=contract, patches=DENSE_PATCHES, hardware=fingerprint(), data={}, space=space)
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for method in methods:
        samples: dict[int, list[tuple[float, float]]] = {n: [] for n in sizes}
        for seed in range(seeds):
            surface = Surface(space, DENSE_TIME, DENSE_MEM, base_peak=0.45 * space.budget_bytes,
                              startup_effects=DENSE_STARTUP, seed=seed)
            with tempfile.TemporaryDirectory() as tmp:
                bank = f"sqlite:///{tmp}/bank.db" if "+" in method else None
                run = _Run(fake, method, seed, lambda c, a, surface=surface: surface.run(c), bank, rank=False)
                run.strategy = run.strategy.prepare(space)
                for _ in range(max(sizes)):
                    asked = (time.perf_counter(), time.process_time())
                    proposal = run.strategy.propose(run.history)
                    if proposal is None:
                        break
                    run.execute(proposal.candidate, "search", None, asked)
            for n in sizes:
                if len(run.records) >= n:
                    rec = run.records[n - 1]
                    samples[n].append((rec["ask_s"], rec["ask_cpu_s"]))
        out[method] = {n: (statistics.median(a for a, _ in v), statistics.median(c for _, c in v))
                       for n, v in samples.items() if v}
        print(f"  overhead {method}: " + ", ".join(f"{n}: {w * 1000:.0f} ms" for n, (w, _) in out[method].items()),
              flush=True)
    return out


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tables", nargs="*", type=Path)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--gp-seeds", type=int, default=None,
                        help="seeds for Optuna's GP alone (its 2-3 s of CPU per suggestion; default --seeds)")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--overhead", action="store_true")
    parser.add_argument("--synthetic", action="store_true",
                        help="also replay on the search tests' invented surface (bench/tuners/synthetic_table.py)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--plots", type=Path, default=DOCS)
    args = parser.parse_args()
    methods = args.methods.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    if args.overhead:
        result = overhead(methods, args.seeds)
        print(report.overhead_table(result))
        print(f"(1-minute load average at the start: {load:.1f})")
        (args.out / "overhead.json").write_text(json.dumps({"load1": load, "seeds": args.seeds, "result": {
            m: {str(n): v for n, v in r.items()} for m, r in result.items()}}, indent=1))
        return
    tables = [Table.load(p) for p in args.tables]
    if args.synthetic:
        from bench.tuners.synthetic_table import surface_table

        tables.append(surface_table())
    for table in tables:
        name = table.data["fixture"]
        runs: dict[str, list[list[dict]]] = {}
        for method in methods:
            started = time.perf_counter()
            seeds = args.gp_seeds if method == "gp" and args.gp_seeds else args.seeds
            runs[method] = [replay(table, method, seed, args.trials) for seed in range(seeds)]
            print(f"  {name} {method}: {seeds} seeds in {time.perf_counter() - started:.0f} s", flush=True)
        oracle_key, oracle = table.oracle()
        print(f"\n{name}: oracle {oracle:.3f}x ({', '.join(table.space.settings(table.rows[oracle_key].candidate))}), "
              f"{len(table.rows)} configurations, {args.seeds} seeds x {args.trials} trials; "
              f"{table.quiet_share():.0%} of the table's runs measured on a quiet machine")
        print(report.summary_table(runs, oracle, args.trials))
        print(report.waste_table(runs))
        args.plots.mkdir(parents=True, exist_ok=True)
        report.plot(runs, oracle, args.trials, args.plots / f"replay_{name}.png", f"replay: {name}, {args.seeds} seeds")
        (args.out / f"replay_{name}.json").write_text(json.dumps({"oracle": oracle, "oracle_key": oracle_key,
                                                                  "load1": load, "runs": runs}))


if __name__ == "__main__":
    main()
