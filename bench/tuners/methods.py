"""The methods compared, and each one's search strategy built as the run stage builds it.

Every method is an ``infrarsi.search.strategy.Strategy``: InfraRSI's sampler, the peers behind the
same ``ask(history)``, or Optuna's TPE / GP driving the study (OOM a failed trial for TPE, a
constraint for GP: ``TrialStore.finish``). Only the search differs; the runner, the contract and
the budget are the same for all.
"""

from __future__ import annotations

from infrarsi.bank import ExperienceBank, WorkloadSignature
from infrarsi.patches import declared_priors
from infrarsi.priors import BuiltinPriors, PriorContext
from infrarsi.search.strategy import Strategy, use_experience

METHODS = ("infrarsi", "infrarsi+bank", "tpe", "gp", "random", "greedy", "batchfinder", "infrarsi+badbank")
"""``+bank``: a bank holding an earlier good run's findings; ``+badbank``: one holding a bad run's
(see ``replay.record_bad_bank``). Last, so every other method keeps its random stream (the index
seeds it)."""


def sampler_of(method: str) -> tuple[str, bool]:
    """The run stage's sampler name and whether the experience bank is used."""
    name, _, bank = method.partition("+")
    return name, bool(bank)


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
                   hardware=table.hardware, min_speedup=min_speedup, noise_cv=table.data.get("noise_cv", 0.0))
    if use_bank:
        use_experience(out, ExperienceBank(bank_url),
                       WorkloadSignature.from_contract(contract, table.data.get("model_facts", {})))
    return out
