"""The methods compared, and each one's search strategy built as the run stage builds it.

Every method is an ``infrarsi.search.strategy.Strategy``: InfraRSI's sampler, the peers behind the
same ``ask(history)``, or Optuna's TPE / GP driving the study (OOM a failed trial for TPE, a
constraint for GP: ``TrialStore.finish``). Only the search differs; the runner, the contract and
the budget are the same for all.
"""

from __future__ import annotations

from infrarsi.bank import ExperienceBank, WorkloadSignature
from infrarsi.priors import BuiltinPriors, PriorContext
from infrarsi.search.strategy import BANK_SEEDS, Strategy, _patch_priors

METHODS = ("infrarsi", "infrarsi+bank", "tpe", "gp", "random", "greedy", "batchfinder")


def sampler_of(method: str) -> tuple[str, bool]:
    """The run stage's sampler name and whether the experience bank is used."""
    return method.removesuffix("+bank"), method.endswith("+bank")


def strategy(method: str, table, seed: int, bank_url: str | None = None) -> Strategy:
    """As ``make_strategy`` builds it for a run (built-in priors: no LLM is reachable here)."""
    name, use_bank = sampler_of(method)
    contract = table.contract
    context = PriorContext(contract=contract, hardware=table.hardware,
                           patches=_patch_priors(contract.memory.device))
    answer = BuiltinPriors().priors(context)
    out = Strategy(name=name, contract=contract, priors=answer.table, priors_source=answer.provider, seed=seed,
                   hardware=table.hardware)
    if use_bank:
        out.bank = ExperienceBank(bank_url)
        out.signature = WorkloadSignature.from_contract(contract, table.data.get("model_facts", {}))
        learned = out.bank.priors_for(out.signature, table.hardware.id, baselines=contract.defaults())
        if len(learned):
            out.priors = out.priors.merged(learned)
        out.seeds = [s.candidate for s in out.bank.seeds(out.signature, table.hardware.id, k=BANK_SEEDS)]
    return out
