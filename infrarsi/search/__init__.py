"""The search: which trial to run next, from every trial so far (pure; runs no processes).

``SearchSpace`` (valid candidates and their encoding), ``TimeModel`` (GP on log step time with
the prior as its mean and pairwise interactions where the priors expect them), ``MemoryModel`` (Tobit on log peak; memory prices), ``prior_checks``
(prior vs observed), and samplers sharing ``ask(history) -> Proposal | None``.
"""

from infrarsi.search.calibration import prior_checks
from infrarsi.search.infrarsi_sampler import InfraRSISampler, Proposal, RankedCandidate
from infrarsi.search.memory_model import MemoryModel, MemoryPrice
from infrarsi.search.peer_samplers import BatchFinderSampler, GreedySampler, RandomSampler
from infrarsi.search.prior_check import PriorCheck
from infrarsi.search.space import SearchSpace
from infrarsi.search.time_model import TimeModel, TimePrediction

__all__ = [
    "BatchFinderSampler", "GreedySampler", "InfraRSISampler", "MemoryModel", "MemoryPrice",
    "PriorCheck", "Proposal", "RandomSampler", "RankedCandidate", "SearchSpace", "TimeModel",
    "TimePrediction", "prior_checks",
]
