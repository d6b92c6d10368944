"""Which settings break the job: P(runs) of every candidate, from the trials that failed for good.

A crash, a numerics failure or a contract violation repeats on a rerun, so its configuration is
never tried again; but its cause comes back in other configurations (compile tripping an assert
whatever the micro-batch). Each failure is blamed on the settings of its candidate that no clean
trial has held, in equal shares (on all of its settings when every one of them has run clean: an
interaction). A setting's failure rate is its blame against its clean runs, with a quarter of a
clean run as prior: one failure that only it can explain makes it 80% likely to break again.
Failures are deterministic, so two that only it explains, and never a clean run, settle it (else
EI, high exactly where nothing was ever measured, keeps coming back to it).

The rate applies to candidates that hold everything the failures blamed on the setting had in
common: four crashes of ``static_graph`` under two processes, all with a fused optimizer, do not
tell two processes alone from two processes with ``static_graph``, so two processes without it
stays worth a trial.

A numerics failure is not blamed on a setting whose knob cannot change what is computed (how often
it logs, the evaluation's batch, data-loading workers and pinned memory, the thread count, whose
reordered sums doctor's allowance covers) while another suspect can carry it: a search that moves
the logging interval with the split count would otherwise share the split's blame with it, and try
the split again and again beside another logging interval.
"""

from __future__ import annotations

import numpy as np

from infrarsi.search.space import SearchSpace
from infrarsi.trials import TrialResult, TrialStatus

BREAKING = (TrialStatus.CRASH, TrialStatus.NUMERICS, TrialStatus.CONTRACT)
CLEAN = (TrialStatus.OK, TrialStatus.ABORTED_SLOW)
"""Ran its steps: an aborted trial was slow, not broken. OOMs and timeouts say nothing either way."""
PRIOR_CLEAN = 0.25
SETTLED = 2.0
"""Blame (whole failures) at which a setting that never ran clean is taken to break the job."""
SAME_NUMERICS = ("logging", "eval_batch", "dataloader_workers", "dataloader_pin_memory", "threads")
"""Knob roles that leave the trained numbers as they are (within doctor's reordering allowance)."""


def failure_rates(space: SearchSpace, history: list[TrialResult]) -> np.ndarray:
    """Per ``space.setting_keys``: the estimated share of runs the setting breaks."""
    n = len(space.setting_keys)
    clean = [t.candidate for t in history if t.status in CLEAN]
    clean_runs = space.indicator(clean).sum(axis=0) if clean else np.zeros(n)
    blame = np.zeros(n)
    neutral = _same_numerics(space)
    for held, status in zip(_broken(space, history), _broken_statuses(history)):
        suspects = held * (clean_runs == 0)
        suspects = suspects if suspects.any() else held
        if status is TrialStatus.NUMERICS and (suspects * ~neutral).any():
            suspects = suspects * ~neutral
        if suspects.any():
            blame += suspects / suspects.sum()
    settled = (blame >= SETTLED) & (clean_runs == 0)
    return np.where(settled, 1.0, blame / (blame + clean_runs + PRIOR_CLEAN))


def p_runs(space: SearchSpace, history: list[TrialResult], indicator: np.ndarray) -> np.ndarray:
    """P(no setting breaks it), for the rows of a setting indicator matrix."""
    rates = failure_rates(space, history)
    broken = _broken(space, history)
    numerics = np.array([st is TrialStatus.NUMERICS for st in _broken_statuses(history)], dtype=bool)
    neutral = _same_numerics(space)
    out = np.ones(len(indicator))
    for s in np.flatnonzero(rates > 0):
        rows = broken[:, s] > 0
        core = np.all(broken[rows] > 0, axis=0)
        if numerics[rows].all() and not neutral[s]:
            core &= ~neutral  # what it broke with, less what cannot break the numbers
        holds_core = np.all(indicator[:, core] > 0, axis=1)
        out *= np.where(holds_core, 1.0 - min(rates[s], 0.999), 1.0)
    return out


def _broken(space: SearchSpace, history: list[TrialResult]) -> np.ndarray:
    failed = [t.candidate for t in history if t.status in BREAKING]
    return space.indicator(failed) if failed else np.zeros((0, len(space.setting_keys)))


def _broken_statuses(history: list[TrialResult]) -> list[TrialStatus]:
    return [t.status for t in history if t.status in BREAKING]


def _same_numerics(space: SearchSpace) -> np.ndarray:
    roles = {k.name: k.role for k in space.knobs}
    return np.array([roles.get(space.knob_of(key)) in SAME_NUMERICS for key in space.setting_keys], dtype=bool)
