"""The methods compared, and each one's search strategy built as the run stage builds it.

Every method is an ``infrarsi.search.strategy.Strategy``: InfraRSI's sampler, the peers, or
Optuna's TPE / GP, all behind the same ``ask(history)`` (Optuna's: OOM a failed trial for TPE, a
constraint for GP, ``infrarsi.search.optuna_samplers``). Only the search differs; the runner, the
contract and the budget are the same for all.
"""

from __future__ import annotations

from infrarsi.bank.experience import Experience
from infrarsi.patches import declared_priors
from infrarsi.priors import BuiltinPriors, PriorContext
from infrarsi.search.strategy import Strategy

METHODS = ("infrarsi", "infrarsi+bank", "tpe", "gp", "random", "greedy", "batchfinder", "infrarsi+badbank", "priors")
"""``+bank``: a bank holding an earlier good run's findings; ``+badbank``: one holding a bad run's
(see ``replay.record_bad_bank``); ``priors``: the priors alone (``PriorsOnlySampler``). The later
ones last, so every earlier method keeps its random stream (the index seeds it)."""
MAX_REJECTED = 50
"""Optuna's asks in a row that the table cannot run (outside a constrained space's valid points)
given back before the last one is run anyway, as the job would be launched and refused."""


def sampler_of(method: str) -> tuple[str, bool]:
    """The run stage's sampler name and whether the experience bank is used."""
    name, _, bank = method.partition("+")
    return name, bool(bank)


def experience(table, bank_url: str | None) -> Experience:
    """The table's workload and machine in the bank at ``bank_url``, as the run stage opens it."""
    return Experience.open(bank_url, table.contract, table.data.get("model_facts", {}), table.hardware)


def strategy(method: str, table, seed: int, bank_url: str | None = None) -> Strategy:
    """As ``make_strategy`` builds it for a run (built-in priors: no LLM is reachable here)."""
    name, use_bank = sampler_of(method)
    contract = table.contract
    context = PriorContext(contract=contract, hardware=table.hardware,
                           patches=declared_priors(table.hardware.device))
    answer = BuiltinPriors().priors(context)
    # Doctor's noise floor as the table measured it decides, as in the run stage, which measured
    # speed-ups are re-verified whatever the model ranks. Its CV is not given to the models (the
    # replay has never done so: the tables' doctor ran on a busy machine, dense's CV is 0.57).
    min_speedup = table.data.get("doctor", {}).get("noise", {}).get("min_speedup", float("inf"))
    # A runner whose noise is known exactly (the simulated cluster's ``noise_cv``) gives the models
    # doctor's CV as the run stage does; the measured tables leave it out.
    out = Strategy(name=name, contract=contract, priors=answer.table, priors_source=answer.provider, seed=seed,
                   hardware=table.hardware,
                   min_speedup=min_speedup, noise_cv=table.data.get("noise_cv", 0.0), max_rejected=MAX_REJECTED)
    if use_bank:
        advice = experience(table, bank_url).advice(contract, out.priors)
        out.use_bank(advice.priors, advice.seeds)
    return out
