"""How long InfraRSI's sampler takes to suggest the next trial, against history size.

Synthetic history (random candidates measured on a known surface shaped like the dense GPT
fixture, slow ones aborted early as the runner does) on the dense fixture's space: micro-batch
{1,2,4,8,16} x threads {1,2} x checkpointing x compile x dtype x 3 optimizers x 5 patches
(7,680 candidates, all scored every suggestion). Goal: <= 200 ms per suggestion at 100 trials.

    .venv/bin/python bench/suggest_overhead.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

from infrarsi.search.infrarsi_sampler import InfraRSISampler
from infrarsi.search.memory_model import MemoryModel
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import (
    DENSE_MEM,
    DENSE_PATCHES,
    DENSE_STARTUP,
    DENSE_TIME,
    Surface,
    contract_with,
    dense_knobs,
)
from infrarsi.search.time_model import TimeModel
from infrarsi.trials import TrialResult, TrialStatus

ABORT_RATIO = 3.0
"""A trial this many times slower than the baseline is aborted after two steps."""


def history(space: SearchSpace, n: int, seed: int) -> list[TrialResult]:
    surface = Surface(space, DENSE_TIME, DENSE_MEM, base_peak=0.45 * space.budget_bytes,
                      startup_effects=DENSE_STARTUP, seed=seed)
    rng = np.random.default_rng(seed)
    cands = [space.baseline()] + space.sample(rng, n - 1)
    out = []
    base_step = None
    for cand in cands:
        res = surface.run(cand)
        base_step = base_step or res.step_time
        if res.ok and res.step_time > ABORT_RATIO * base_step:
            res.status, res.step_times = TrialStatus.ABORTED_SLOW, res.step_times[:2]
        out.append(res)
    return out


def ms(fn, clock=time.perf_counter) -> float:
    start = clock()
    fn()
    return 1000 * (clock() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    space = SearchSpace.from_contract(contract_with(dense_knobs()), DENSE_PATCHES)
    space.enumerated()  # built once per study, not per suggestion
    print(f"space: {space.size()} candidates, {space.n_features} features, {len(space.setting_keys)} settings")
    print(f"{'trials':>6} {'oom':>4} {'abort':>5} {'time fit':>9} {'mem fit':>8} {'ask cold':>9} {'ask warm':>9} {'warm cpu':>9}")
    for n in (25, 50, 100):
        rows = {"time": [], "mem": [], "cold": [], "warm": [], "cpu": []}
        for r in range(args.repeats):
            hist = history(space, n, seed=r)
            with threadpool_limits(limits=1, user_api="blas"):
                rows["time"].append(ms(lambda hist=hist: TimeModel(space).fit(hist)))
                rows["mem"].append(ms(lambda hist=hist: MemoryModel(space).fit(hist)))
            sampler = InfraRSISampler(space)
            rows["cold"].append(ms(lambda sampler=sampler, hist=hist: sampler.ask(hist)))
            rows["warm"].append(ms(lambda sampler=sampler, hist=hist: sampler.ask(hist[:-1])))
            rows["cpu"].append(ms(lambda sampler=sampler, hist=hist: sampler.ask(hist), time.process_time))
        oom = sum(t.status is TrialStatus.OOM for t in hist)
        aborted = sum(t.status is TrialStatus.ABORTED_SLOW for t in hist)
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(f"{n:>6} {oom:>4} {aborted:>5} {med['time']:>7.0f}ms {med['mem']:>6.0f}ms "
              f"{med['cold']:>7.0f}ms {med['warm']:>7.0f}ms {med['cpu']:>7.0f}ms")
    print("median over repeats, wall clock unless noted; ask = both fits + scoring every candidate + pairing;")
    print("warm = a later suggestion (hyperparameters start from the last fit); warm cpu = its process CPU "
          f"time, which other load on the machine inflates less (load average now {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
