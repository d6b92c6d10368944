"""What the benchmark reports, from per-trial records of many runs (pure functions).

A run is a list of trial records, one per trial spent: ``status``, ``wall_s`` (its cost) and
``speedup`` (the verified speedup of what the method would pick after that trial: the true,
table-measured job speedup of its pick, 1.0 for the baseline or nothing deployable).
"""

from __future__ import annotations

import math

import numpy as np

WASTE = ("oom", "timeout", "crash", "aborted_slow", "numerics", "contract")
"""Statuses whose seconds bought no usable measurement of a candidate."""


def best_so_far(run: list[dict], trials: int) -> list[float]:
    """Verified speedup after each of the first ``trials`` trials (held after a run ends early)."""
    out, best = [], 1.0
    for i in range(trials):
        if i < len(run):
            best = run[i]["speedup"]
        out.append(best)
    return out


def curve(runs: list[list[dict]], trials: int) -> dict[str, np.ndarray]:
    """Median and 25-75 % band over runs of the verified speedup after each trial."""
    grid = np.array([best_so_far(r, trials) for r in runs])
    return {"median": np.median(grid, axis=0), "q25": np.percentile(grid, 25, axis=0),
            "q75": np.percentile(grid, 75, axis=0)}


def trials_to(run: list[dict], target: float) -> float:
    """1-based trial count at which the pick first reaches ``target`` speedup; inf if never."""
    for i, rec in enumerate(run):
        if rec["speedup"] >= target - 1e-12:
            return float(i + 1)
    return math.inf


def median_trials_to(runs: list[list[dict]], target: float) -> tuple[float, float]:
    """Median trials to reach ``target`` (inf when most runs never do) and the share that did."""
    counts = [trials_to(r, target) for r in runs]
    reached = sum(math.isfinite(c) for c in counts) / len(counts)
    return float(np.median(counts)), reached


def waste(runs: list[list[dict]]) -> dict[str, float]:
    """Seconds per run (mean over runs) spent on each failing status, their total and share."""
    n = len(runs)
    by_status = {s: sum(rec["wall_s"] for r in runs for rec in r if rec["status"] == s) / n for s in WASTE}
    total = sum(rec["wall_s"] for r in runs for rec in r) / n
    wasted = sum(by_status.values())
    return {**by_status, "wasted_s": wasted, "total_s": total, "share": wasted / total if total else 0.0}
