"""How a run concludes: the search's best re-verified against the baseline in interleaved rounds,
once per round however many workers share the study (``SharedRound.conclude``)."""

from __future__ import annotations

from dataclasses import replace

from infrarsi.events import Event
from infrarsi.experiment.concluded import Conclusion
from infrarsi.experiment.session import TrialSession
from infrarsi.experiment.startup import declared_startup
from infrarsi.noise import PROMOTION_FLOOR
from infrarsi.patches.diff_patch import LLM_PREFIX
from infrarsi.records import RunStatus
from infrarsi.search.history import believable_gain
from infrarsi.search.strategy import Strategy
from infrarsi.trials import Candidate, TrialResult
from infrarsi.whole_process import Rounds, best_promoted, interleave, planned_gain


def conclude(session: TrialSession, context: Strategy) -> Conclusion:
    """Verification, once for the round: here, or read from the worker that did it."""
    concluded, elsewhere = session.round.conclude(
        lambda: verify(session, context),
        wait_limit_s=(session.timeout_s or 600.0) + session.store.grace_s() + 60.0)
    if elsewhere is None:
        return concluded
    return replace(concluded, elsewhere=elsewhere,
                   message=f"verified by another worker (study trial {elsewhere}): {concluded.message}")


def verify(session: TrialSession, context: Strategy) -> Conclusion:
    """The contract's ``[verify]`` candidates against the baseline: the verdicts and the promoted one."""
    contract = session.contract
    policy = contract.verify_policy
    history, baseline = session.store.history(), context.baseline()
    top = context.to_verify(history, policy.candidates)
    if not top:
        return Conclusion(RunStatus.NO_PROMOTION,
                          "no candidate ranked ahead of the baseline or measured faster than it to verify")

    def run_one(cand: Candidate, _round: int, steps: int) -> TrialResult:
        out = session.execute(cand, "verification", reason=f"re-verification, {steps} steps", steps=steps)
        assert out is not None  # only a trial run exclusively is ever given up to another worker
        return out

    # Doctor's baseline pair is a round already measured, unless the machine's normal changed since.
    reference = () if session.renormalized else session.reference
    gain = believable_gain(history, top, baseline, contract.workload.planned_steps, context.min_speedup)
    rounds = Rounds.sized(policy, session.spread_prior, PROMOTION_FLOOR, arms=len(top),
                          reference=len(reference), gain=gain)
    measured = (f" (the search measured {gain * context.min_speedup:.2f}x; its noise floor is "
                f"{context.min_speedup:.3f})") if gain else ""
    session.on_event(Event("run", "log", f"verification plans {rounds.least}-{rounds.most} rounds of {len(top)} "
                                         f"candidate(s), sized for a {planned_gain(gain):.2f}x gain{measured}"))
    verdicts, _ = interleave(
        top, baseline, run_one,
        rounds=rounds, lengths=session.lengths, floor=PROMOTION_FLOOR,
        compare_steps=contract.loss.compare_steps,
        declared_startup=lambda cand: declared_startup(contract, cand),
        untrusted=lambda cand: any(p.startswith(LLM_PREFIX) for p in cand.patches), reference=reference,
        prior=session.spread_prior)
    promoted = best_promoted(verdicts)
    if promoted is None:
        return Conclusion(RunStatus.NO_PROMOTION, "no candidate cleared the promotion floor in re-verification",
                          tuple(verdicts))
    speedup = promoted.job_speedup
    assert speedup is not None  # a verdict is promoted on its whole-process speed-up
    return Conclusion(RunStatus.OK, f"promoted: {speedup[0]:.2f}x faster (95% CI low {speedup[1]:.2f}x)",
                      tuple(verdicts), promoted)
