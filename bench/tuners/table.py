"""A measured space as a trial oracle: each "trial" of a configuration is one of its real runs.

The run a replayed trial returns is drawn from the configuration's measured repeats (the measured
noise, OOMs near the budget included), then judged as the live runner would: a run that is clearly
slower than the abort bound stops at the first step where one of the runner's own rules
(``infrarsi.runner.abort``: clearly slower over 3 measured steps, or far slower over the steps
after the first) fires, and costs only the seconds up to that step.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from infrarsi.contract import Contract, contract_path, load_contract
from infrarsi.records import HardwareFingerprint
from infrarsi.runner.abort import clearly_slower, far_slower
from infrarsi.search.history import measured_job_s
from infrarsi.search.space import SearchSpace
from infrarsi.trials import Candidate, TrialResult, TrialStatus


def contract_from_toml(text: str) -> Contract:
    with tempfile.TemporaryDirectory() as tmp:
        path = contract_path(Path(tmp))
        path.parent.mkdir(parents=True)
        path.write_text(text)
        return load_contract(Path(tmp))


@dataclass(slots=True)
class Row:
    candidate: Candidate
    runs: list[TrialResult]
    short: bool
    """Measured with fewer steps than a search trial runs (see measure_space)."""


class Table:
    def __init__(self, data: dict):
        self.data = data
        self.contract = contract_from_toml(data["contract_toml"])
        self.patches = list(data["patches"])
        self.space = SearchSpace.from_contract(self.contract, self.patches)
        self.hardware = HardwareFingerprint.from_dict(data["hardware"])
        self.planned = self.contract.workload.planned_steps
        self.measured_steps = self.contract.workload.measured_steps
        self.timeout_s = float(data["timeout_s"])
        self.rows: dict[str, Row] = {}
        for row in data["rows"]:
            cand = Candidate.from_dict(row["candidate"])
            runs = [TrialResult(status=TrialStatus(r["status"]), candidate=cand, step_times=r["step_times"],
                                warmup_times=r["warmup_times"], startup_s=r["startup_s"], wall_s=r["wall_s"],
                                peak_bytes=r["peak_bytes"], detail=r["detail"]) for r in row["runs"]]
            self.rows[cand.key()] = Row(cand, runs, bool(row.get("short")))
        missing = [c.key() for c in self.space.all_candidates() if c.key() not in self.rows or not self.rows[c.key()].runs]
        if missing:
            raise ValueError(f"the table lacks {len(missing)} configurations of its space, e.g. {missing[0]}")
        self.baseline_job_s = self.job_s(self.space.baseline().key())

    def quiet_share(self) -> float:
        """Share of the measured runs that ran with the machine otherwise quiet (measure_space)."""
        runs = [r for row in self.data["rows"] for r in row["runs"]]
        return sum(bool(r.get("quiet")) for r in runs) / len(runs) if runs else 0.0

    @classmethod
    def load(cls, path: Path) -> Table:
        return cls(json.loads(Path(path).read_text()))

    def job_s(self, key: str) -> float:
        """The configuration's projected job seconds (median over its runs); inf unless every run
        ended ok: a configuration that sometimes fails would not survive re-verification."""
        runs = self.rows[key].runs
        if not runs or not all(r.ok and r.step_time for r in runs):
            return float("inf")
        return statistics.median(measured_job_s(r, self.planned) for r in runs)

    def speedup(self, key: str | None) -> float:
        """Job-time speedup over the baseline; 1.0 when nothing deployable is picked."""
        if key is None:
            return 1.0
        return max(1.0, self.baseline_job_s / self.job_s(key)) if self.job_s(key) < float("inf") else 1.0

    def oracle(self) -> tuple[str, float]:
        key = min(self.rows, key=self.job_s)
        return key, self.speedup(key)

    def search_space(self, patches: list[str]) -> SearchSpace:
        """The space the run stage searches once ``patches`` are validated."""
        return SearchSpace.from_contract(self.contract, patches)

    def candidate(self, key: str) -> Candidate:
        return self.rows[key].candidate

    def trial(self, candidate: Candidate, rng: np.random.Generator, abort_step_time: float | None) -> TrialResult:
        row = self.rows[candidate.key()]
        run = row.runs[int(rng.integers(len(row.runs)))]
        out = TrialResult(status=run.status, candidate=candidate, step_times=list(run.step_times),
                          warmup_times=list(run.warmup_times), startup_s=run.startup_s, wall_s=run.wall_s,
                          peak_bytes=run.peak_bytes, detail=run.detail)
        if not out.ok:
            return out
        if aborted(out, abort_step_time):
            return out
        if row.short:
            # Not aborted: the search would have run every measured step; charge them.
            out.wall_s += (self.measured_steps - len(out.step_times)) * statistics.median(out.step_times)
        if out.wall_s > self.timeout_s:
            out.status, out.wall_s, out.step_times = TrialStatus.TIMEOUT, self.timeout_s, []
        return out


def aborted(out: TrialResult, abort_step_time: float | None) -> bool:
    """Step by step, as the runner sees them arrive, whether one of its two rules stops the ok run
    ``out``: when one fires, ``out`` becomes the aborted run, charged up to that step."""
    every = out.warmup_times + out.step_times
    warm = len(out.warmup_times)
    for j in range(2, len(every) + 1):
        if clearly_slower(every[warm:j], abort_step_time) or far_slower(every[1:j], abort_step_time):
            out.wall_s -= sum(every[j:])
            out.warmup_times, out.step_times = every[:min(j, warm)], every[warm:j]
            out.status = TrialStatus.ABORTED_SLOW
            return True
    return False
