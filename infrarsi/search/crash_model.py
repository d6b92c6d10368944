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

The sampler first keeps out every candidate that ``p_runs_each`` (each setting's rate wherever it is
held) gives worse than even odds, for seeds and expected improvement alike; ``p_runs`` then weighs
the rest. The price: a setting that only ever failed beside one that never ran clean is not tried
alone until something else clears it.

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
    causes = _causes(space)
    return _cause_rates(space, history, causes) @ causes.T


def p_runs(space: SearchSpace, history: list[TrialResult], indicator: np.ndarray) -> np.ndarray:
    """P(no setting breaks it), for the rows of a setting indicator matrix."""
    causes = _causes(space)
    rates = _cause_rates(space, history, causes)
    broken = _held(_broken(space, history), causes)
    numerics = np.array([st is TrialStatus.NUMERICS for st in _broken_statuses(history)], dtype=bool)
    neutral = _same_numerics(space, causes)
    held = _held(indicator, causes)
    out = np.ones(len(indicator))
    for c in np.flatnonzero(rates > 0):
        rows = broken[:, c] > 0
        core = np.all(broken[rows] > 0, axis=0)
        if numerics[rows].all() and not neutral[c]:
            core &= ~neutral  # what it broke with, less what cannot break the numbers
        holds_core = np.all(held[:, core] > 0, axis=1)
        out *= np.where(holds_core, 1.0 - min(rates[c], 0.999), 1.0)
    return out


def p_runs_each(space: SearchSpace, history: list[TrialResult], indicator: np.ndarray) -> np.ndarray:
    """P(no setting breaks it) with each setting's failure rate applied wherever it is held, what
    it failed beside or not: the cautious reading, for seeds, which differ from every earlier trial
    in several settings and so would slip past ``p_runs``'s shared-core rule every time."""
    rates = np.minimum(failure_rates(space, history), 0.999)
    return np.exp(indicator @ np.log1p(-rates))


def _cause_rates(space: SearchSpace, history: list[TrialResult], causes: np.ndarray) -> np.ndarray:
    """Per cause (``_causes``): the estimated share of runs it breaks."""
    clean = [t.candidate for t in history if t.status in CLEAN]
    clean_runs = _held(space.indicator(clean), causes).sum(axis=0) if clean else np.zeros(causes.shape[1])
    blame = np.zeros(causes.shape[1])
    neutral = _same_numerics(space, causes)
    for held, status in zip(_held(_broken(space, history), causes), _broken_statuses(history), strict=True):
        suspects = held * (clean_runs == 0)
        suspects = suspects if suspects.any() else held
        if status is TrialStatus.NUMERICS and (suspects * ~neutral).any():
            suspects = suspects * ~neutral
        if suspects.any():
            blame += suspects / suspects.sum()
    settled = (blame >= SETTLED) & (clean_runs == 0)
    return np.where(settled, 1.0, blame / (blame + clean_runs + PRIOR_CLEAN))


def _causes(space: SearchSpace) -> np.ndarray:
    """Settings x causes, 0/1: each setting is its own cause, except the values of a knob a patch
    adds (``Knob.patch``: the split count), which apply the same patch whatever the value, so that
    a failure at 2 splits is expected at 4 too."""
    patch_of = {k.name: k.patch for k in space.knobs if k.patch}
    names = [patch_of.get(space.knob_of(key)) or key for key in space.setting_keys]
    distinct = list(dict.fromkeys(names))
    causes = np.zeros((len(names), len(distinct)))
    causes[np.arange(len(names)), [distinct.index(n) for n in names]] = 1.0
    return causes


def _held(indicator: np.ndarray, causes: np.ndarray) -> np.ndarray:
    """Which causes each row of a setting indicator holds."""
    return (indicator @ causes > 0).astype(float)


def _broken(space: SearchSpace, history: list[TrialResult]) -> np.ndarray:
    failed = [t.candidate for t in history if t.status in BREAKING]
    return space.indicator(failed) if failed else np.zeros((0, len(space.setting_keys)))


def _broken_statuses(history: list[TrialResult]) -> list[TrialStatus]:
    return [t.status for t in history if t.status in BREAKING]


def _same_numerics(space: SearchSpace, causes: np.ndarray) -> np.ndarray:
    """Per cause: whether its knob cannot change the trained numbers."""
    roles = {k.name: k.role for k in space.knobs}
    neutral = np.array([roles.get(space.knob_of(key)) in SAME_NUMERICS for key in space.setting_keys], dtype=float)
    return (neutral @ causes) > 0
