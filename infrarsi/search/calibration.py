"""Prior vs observed for every setting that has a prior, for the report and the experience bank."""

from __future__ import annotations

from infrarsi.priors.types import PriorTable
from infrarsi.search.memory_model import MemoryModel
from infrarsi.search.part_interactions import PartInteractions
from infrarsi.search.prior_check import PriorCheck, check_all
from infrarsi.search.space import SearchSpace
from infrarsi.search.time_model import TimeModel
from infrarsi.trials import TrialResult


def prior_checks(space: SearchSpace, priors: PriorTable, history: list[TrialResult], *,
                 noise_cv: float | None = None, interactions: PartInteractions | None = None) -> list[PriorCheck]:
    """Time checks from the data-only fit the time model uses to drop miscalibrated priors (held
    to doctor's ``noise_cv`` when given, as the search's own model holds them); memory checks from
    the Tobit fit (its pull toward the prior is weak by construction)."""
    checks = list(TimeModel(space, priors, noise_cv=noise_cv).fit(history).checks)
    memory = MemoryModel(space, priors, interactions=interactions).fit(history)
    if memory.fitted and memory.data is not None:  # data is set whenever it fitted
        effects, sds = memory.setting_effects()
        checks += check_all(space.setting_keys, priors, "memory", memory.data.indicator, effects, sds)
    return checks
