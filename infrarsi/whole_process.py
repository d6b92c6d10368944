"""Re-verification: candidates rerun against the baseline in interleaved order, then judged on whole processes.

The number that decides comes from InfraRSI's clock over whole trial processes, launch to exit,
never from what the job reports: the launcher lives in the job's process, so anything it sends can
be rewritten by the candidate's code. In every round each arm (the baseline and every candidate)
runs twice, at a short length and at a long one doctor chose from measured noise
(:class:`Lengths`). Per step is the difference of the two lengths' times over the difference of
their steps; the job at the owner's
real length (the contract's planned steps) is the short run's time plus the remaining steps at that
pace (:func:`whole_process`). A job that does its work early, late, in a burst or before it is
watched pays for it in these times; one that does less work fails the parameter checksum, which
InfraRSI computes itself from the parameters each process leaves behind. The job cannot tailor its
work to its length: it never knows it (infrarsi/launcher/control.py).

The per-step figure is the largest of the readings that apply, each a bound a different forgery
cannot lower: the difference of the exits; the difference of the stops (when InfraRSI told the job
to stop, after its step records: time spent at exit only in the short run lowers the first, not
this one; work deferred past the stop raises the first); and, for a candidate carrying code
InfraRSI did not write (a model's diff) that declares no one-off start-up cost, its whole long run
less the baseline's start-up, over its steps: work moved before the first step shortens both
differences, but not this one. Such code is held to the baseline's start-up, since start-up it
really adds (allocating more at once, say) is charged to its steps; knobs and the library's
patches, which are InfraRSI's own code, are measured by the differences alone.

A candidate is promoted only if the lower bound of its job-time speedup clears the promotion floor
(``infrarsi.noise.PROMOTION_FLOOR``), every one of its reruns kept the loss invariant, its start-up
did not grow past the baseline's in the same rounds by more than noise and the one-off cost it
declares (``runner.accounting.startup_problem``), and its step records tell the same story as its
wall time: a record-based per-step speed-up outside the whole-process interval (widened by the
floor) is a contract breach (:data:`RECORDS_DISAGREE`), whatever either figure says.

Every round runs every arm at both lengths in an order drawn at random (:data:`ORDER`), so a slow
drift of the machine, or a run that leaves it slower for the next process, falls on all arms
alike; every run of a candidate that declares no one-off start-up is held to doctor's start-up
(``TrialSpec.startup_limit_s``). A rerun that other processes disturbed (runner/interference.py)
is repeated by the caller (experiment/quiet.py) rather than widening the interval; one still
disturbed after its reruns counts as a missing measurement, never as a failure of its candidate.
Doctor's baseline pair at these lengths is the first baseline round (``reference``): measured
once, never run again.

What a verification costs follows from the noise doctor measured: the long length is the one
whose rounds cost the fewest seconds, start-ups included (:meth:`Lengths.of`), and the rounds are
as few as certify with 80% power the gain the search's trials make believable, never planned for
less than ``TARGET_GAIN`` (:func:`rounds_needed`). That belief only plans the rounds: the error
each look spends is fixed before any of them runs, so a trial that exaggerated its gain buys
itself fewer chances, never an easier test. How many rounds is
then sequential (:class:`Rounds`): at least ``least``, then one more at a time while a candidate's
interval still straddles the floor and the rounds left could lift it past the floor if its speedup
held (``noise.futile``), up to ``most``. Looking after every round would inflate the
false-promotion rate, and so would judging several candidates, so each look spends a share of the
error (:meth:`Rounds.level`) and the candidates share it evenly: all the intervals hold together
with the stated confidence, and that is the "95% CI" the report prints. Each interval pools the
spread of every arm measured in the same rounds, moderated toward the spread doctor expected of a
round (``noise.pooled_speedup_interval``, ``noise.SpreadPrior``).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from infrarsi.contract import VerifyPolicy, Workload
from infrarsi.noise import PROMOTION_FLOOR, SpeedupInterval, SpreadPrior, futile, pooled_speedup_interval, t_quantile
from infrarsi.records.verdict import Verdict
from infrarsi.runner.accounting import startup_problem
from infrarsi.trials import Candidate, TrialResult, TrialStatus

Arm = TypeVar("Arm")
"""What a round runs twice: a candidate in the run, a worktree's name in the verify stage."""
RunOne = Callable[[Candidate, int, int], TrialResult]
"""Runs one candidate once for a number of steps (the first int is the round); the caller records
it wherever it keeps trials."""
DeclaredStartup = Callable[[Candidate], "float | None"]
"""The one-off start-up seconds a candidate declares (compilation); None: any start-up is its own."""
Untrusted = Callable[[Candidate], bool]
"""Whether a candidate carries code InfraRSI did not write (held to the baseline's start-up)."""
RECORDS_DISAGREE = "the job's step records disagree with its wall time"
MAX_EXTRA_S = 30.0
"""Steps are added to the long length only up to this many seconds of the baseline's steps: a
verification round stays affordable on a job with a noisy start-up."""
MIN_PROCESS_SD_S = 0.15
"""The smallest run-to-run spread of a whole process's time believed from a few doctor runs: the
README job's verification short runs spread 0.15 s on two machines, with 2 and 4 s of start-up
(docs/benchmarks.md, issue 49)."""
STARTUP_SPREAD = 0.0375
"""The spread of a whole process's time believed from its start-up, as a share of it: across
interleaved verification rounds of the README's job the processes spread 0.15 s with about 4 s of
start-up, four times what doctor's back-to-back runs showed (docs/benchmarks.md, whole-process
verification)."""
STEPS_SPREAD = 0.006
"""... and from its steps, as a share of their time: 62-step runs of the same job measured a step
within 0.9% a round, 0.075 s of 12 s of steps. A process keeps its own pace, though: the A/A
campaigns of issue 49 measured the same configuration's per-step figure 2-5% apart process to
process, so the share doctor's runs show (their medians' CV, ``step_cv``) is believed when larger."""
POWER_Z = 0.84
"""Verification is sized so that a candidate of the gain it plans for clears the floor in 80% of runs."""
MIN_STEP_S = 1e-6
"""A per-step difference at or below zero is noise larger than the steps: floored here, it gives
an interval too wide to promote anything."""


@dataclass(frozen=True, slots=True)
class Lengths:
    """The two step counts of a verification round, and the owner's real length."""

    short: int
    long: int
    planned: int

    @classmethod
    def of(cls, workload: Workload, *, step_s: float | None = None, startup_s: float | None = None,
           process_sd_s: float | None = None, step_cv: float = 0.0, policy: VerifyPolicy | None = None,
           floor: float = PROMOTION_FLOOR, prior_df: int = 0) -> Lengths:
        """The warm-up (at least one step) as the short length: the steps that carry one-off work
        (allocation, the counted FLOPs) are in both. The contract's length as the long one, longer
        when that makes verification cheaper: given the baseline's ``step_s``, its ``startup_s``
        and the spread of its whole-process time (``process_sd_s`` of doctor's runs, believed no
        smaller than :func:`spread` says from the runs' ``step_cv``), the long length whose rounds (as many as
        :func:`rounds_needed` says a ``TARGET_GAIN`` candidate needs, from the contract's
        ``policy``, the spread believed as ``prior_df`` degrees of freedom) cost the fewest
        seconds, start-ups included; at most MAX_EXTRA_S more of steps, never past the owner's
        planned length."""
        short = max(1, workload.warmup_steps)
        long = max(workload.total_steps, short + 1)
        # A job is told the same step count in every run (runner.command.job_steps): none longer.
        cap = max(workload.planned_steps, workload.total_steps, short + 1)
        if not step_s or startup_s is None:
            return cls(short=short, long=min(long, cap), planned=workload.planned_steps)
        most = min(cap, max(long, short + math.ceil(MAX_EXTRA_S / step_s)))
        options = sorted({min(most, round(long * (most / long) ** (i / 24))) for i in range(25)})

        def cost(n: int) -> tuple[float, int]:
            lengths = cls(short=short, long=n, planned=workload.planned_steps)
            cv = lengths.round_cv(step_s=step_s, startup_s=startup_s, process_sd_s=process_sd_s, step_cv=step_cv)
            rounds = rounds_needed(cv, policy or _DEFAULT, floor, arms=1, reference=1, prior_df=prior_df)
            per_round = 2 * startup_s + (short + n) * step_s
            return (rounds or math.inf) * per_round, -n if rounds is None else n

        return cls(short=short, long=min(options, key=cost), planned=workload.planned_steps)

    @classmethod
    def recorded(cls, workload: Workload, steps: list[int]) -> Lengths:
        """The lengths doctor chose and measured the baseline at (``DoctorReport.verification_steps``);
        the contract's own when doctor recorded none."""
        if len(steps) == 2 and 1 <= steps[0] < steps[1]:
            return cls(short=steps[0], long=steps[1], planned=workload.planned_steps)
        return cls.of(workload)

    def round_cv(self, *, step_s: float, startup_s: float, process_sd_s: float | None,
                 step_cv: float = 0.0) -> float:
        """The relative spread of one round's projected job time (``whole_process``), from the
        baseline's step, its start-up and the spread of a whole process's time (``spread``): the
        job is the short run plus the rest of the planned steps at the pace of the difference, so
        both runs' spreads enter, the long one's multiplied by the planned steps over the steps
        between the two lengths."""
        k = (self.planned - self.short) / (self.long - self.short)
        short, long = (spread(startup_s, n * step_s, process_sd_s, step_cv) for n in (self.short, self.long))
        return math.hypot((1 - k) * short, k * long) / (startup_s + self.planned * step_s)


def spread(startup_s: float, steps_s: float, process_sd_s: float | None, step_cv: float = 0.0) -> float:
    """The run-to-run spread of a whole process's time believed for a run of ``startup_s`` and
    ``steps_s``: what doctor's runs showed (``process_sd_s``), but never less than
    ``STARTUP_SPREAD`` of its start-up and the larger of ``STEPS_SPREAD`` and ``step_cv`` of its
    steps together, nor ``MIN_PROCESS_SD_S``."""
    steps = max(STEPS_SPREAD, step_cv) * steps_s
    return max(process_sd_s or 0.0, MIN_PROCESS_SD_S, math.hypot(STARTUP_SPREAD * startup_s, steps))


def rounds_needed(round_cv: float, policy: VerifyPolicy, floor: float, *, arms: int = 1,
                  reference: int = 0, prior_df: int = 0, gain: float | None = None) -> int | None:
    """The fewest rounds (from the policy's ``least_rounds`` to its ``most_rounds``) in which a
    candidate of ``gain`` (at least ``TARGET_GAIN``) clears ``floor`` at the last look with 80%
    power (``POWER_Z``),
    each round's job time spread ``round_cv`` (believed as ``prior_df`` degrees of freedom),
    ``arms`` candidates sharing the error and ``reference`` baseline rounds already measured;
    None when even the most do not."""
    margin = math.log(planned_gain(gain)) - math.log(floor)
    for most in range(policy.least_rounds, policy.most_rounds + 1):
        rounds = Rounds(least=policy.least_rounds, most=most)
        level = rounds.level(rounds.looks, arms)
        df = (most + reference - 1) + arms * (most - 1) + prior_df
        se = round_cv * math.sqrt(1 / (most + reference) + 1 / most)
        if (t_quantile(0.5 + level / 2, df) + POWER_Z) * se <= margin:
            return most
    return None


@dataclass(frozen=True, slots=True)
class WholeProcess:
    """One arm's round, from the two runs' whole-process times."""

    step_s: float
    startup_s: float
    """Launch to the first step, the exit included: the short run less its steps."""
    job_s: float
    """Projected time of the owner's job: the short run, then the rest of the planned steps."""


def whole_process(short: TrialResult, long: TrialResult, lengths: Lengths,
                  startup_s: float | None = None) -> WholeProcess | None:
    """None when either run lacks its whole-process times (it did not stop when told).
    ``startup_s``: the start-up the arm may have (the baseline's, plus what it declares); None: any."""
    if short.process_s is None or long.process_s is None or short.stopped_s is None or long.stopped_s is None:
        return None
    steps = lengths.long - lengths.short
    by_exit = (long.process_s - short.process_s) / steps
    by_stop = (long.stopped_s - short.stopped_s) / steps
    beyond_startup = (long.process_s - startup_s) / lengths.long if startup_s is not None else 0.0
    step = max(by_exit, by_stop, beyond_startup, MIN_STEP_S)
    return WholeProcess(step_s=step, startup_s=short.process_s - lengths.short * step,
                        job_s=short.process_s + (lengths.planned - lengths.short) * step)


def job_seconds(result: TrialResult, planned_steps: int) -> float | None:
    """A search trial's job time from its step records: start-up and what its warm-up steps took
    beyond a steady step (a compilation, paid once) once, then the planned steps at the median
    measured step time (the search's cheap signal; never what promotes)."""
    if result.step_time is None:
        return None
    one_off = sum(max(0.0, t - result.step_time) for t in result.warmup_times)
    return (result.startup_s or 0.0) + one_off + planned_steps * result.step_time


@dataclass(frozen=True, slots=True)
class Pair:
    """One arm's two runs of a round."""

    short: TrialResult
    long: TrialResult

    @classmethod
    def recorded(cls, runs: list[dict]) -> tuple[Pair, ...]:
        """Doctor's baseline pair (``DoctorReport.reference_pair``: the short run, then the long
        one) as a round; none when doctor recorded none."""
        if len(runs) != 2:
            return ()
        return (cls(short=TrialResult.from_dict(runs[0]), long=TrialResult.from_dict(runs[1])),)

    @property
    def runs(self) -> tuple[TrialResult, TrialResult]:
        return self.short, self.long

    @property
    def ok(self) -> bool:
        return self.short.ok and self.long.ok


_DEFAULT = VerifyPolicy()
SPENDING_POWER = 2.0
"""The error an interval may spend by look k of K is ``alpha * (k / K) ** SPENDING_POWER`` (Kim and
DeMets' power family; 1 spends it evenly, as Bonferroni over looks did): an early look, which only
a large gain clears, spends little, and the last keeps most of it for the gains near the floor."""
TARGET_GAIN = 1.10
"""The least gain verification is sized to certify (``rounds_needed``): a fused optimizer or a bucket
size, the 5-15% wins that add up, not only the large ones."""


def planned_gain(gain: float | None) -> float:
    """The gain verification plans its rounds for: ``gain`` (``search.history.believable_gain``),
    never less than ``TARGET_GAIN``."""
    return max(gain or TARGET_GAIN, TARGET_GAIN)


@dataclass(frozen=True, slots=True)
class Rounds:
    """Sequential verification: ``least`` rounds, then more while undecided, at most ``most``."""

    least: int = _DEFAULT.least_rounds
    most: int = _DEFAULT.most_rounds
    confidence: float = 0.95

    @classmethod
    def of(cls, policy: VerifyPolicy) -> Rounds:
        """The rounds the contract's ``[verify]`` table asks for."""
        return cls(least=policy.least_rounds, most=policy.most_rounds)

    @classmethod
    def sized(cls, policy: VerifyPolicy, prior: SpreadPrior | None, floor: float, arms: int = 1,
              reference: int = 0, gain: float | None = None) -> Rounds:
        """As few rounds as :func:`rounds_needed` says, from ``prior`` (the relative spread of one
        round's projected job time doctor expects, ``Lengths.round_cv``, and its degrees of
        freedom): from the contract's ``least_rounds``, at most its ``most_rounds`` (those when
        unknown or not enough). ``arms``: the candidates verified together; ``reference``:
        baseline rounds already measured (doctor's pair); ``gain``: the least the candidates are
        expected to gain (``search.history.believable_gain``): a larger one plans fewer rounds, so
        its early looks spend more of the error and decide sooner."""
        most = rounds_needed(prior.cv, policy, floor, arms=arms, reference=reference,
                             prior_df=prior.df, gain=gain) if prior and prior.cv else None
        return cls(least=policy.least_rounds, most=most or policy.most_rounds)

    def __post_init__(self) -> None:
        if not 2 <= self.least <= self.most:
            raise ValueError(f"rounds need 2 <= least <= most, got least={self.least}, most={self.most}")

    @property
    def looks(self) -> int:
        """How many times the intervals may be looked at, the last round included."""
        return self.most - self.least + 1

    def look(self, done: int) -> int:
        """Which look (1 to ``looks``) judging after ``done`` rounds is."""
        return min(max(done - self.least + 1, 1), self.looks)

    def level(self, look: int, arms: int = 1) -> float:
        """One interval's confidence at ``look`` (1-based) of ``arms`` candidates judged together:
        the error spent by that look (``SPENDING_POWER``) shared evenly by the candidates. Over all
        looks and candidates the errors add up to at most 1 - ``confidence`` (the union bound), so
        every interval holds together with the stated confidence whatever the looks' dependence."""
        spent = (look / self.looks) ** SPENDING_POWER - ((look - 1) / self.looks) ** SPENDING_POWER
        return 1 - (1 - self.confidence) * spent / max(1, arms)

    def label(self, arms: int = 1) -> str:
        """How a report names the intervals' confidence."""
        spread = f"error spent over {self.looks} looks" if self.looks > 1 else ""
        shared = f"{arms} candidates" if arms > 1 else ""
        return f"{self.confidence:.0%} CI" + (f" ({', '.join(w for w in (spread, shared) if w)})" if spread or shared else "")

    def run(self, run_round: Callable[[int], None], decided: Callable[[int], bool]) -> int:
        """Run rounds until ``decided(rounds_done)`` or ``most``; how many rounds ran."""
        for r in range(self.most):
            run_round(r)
            if decided(r + 1):
                return r + 1
        return self.most


def ahead_of_baseline(ranked: list[Candidate], baseline: Candidate, k: int) -> list[Candidate]:
    """The first ``k`` of ``ranked`` (fastest first) that it puts ahead of the baseline: only those
    are expected to be faster; the rest would spend every round confirming that they are not."""
    keys = [c.key() for c in ranked]
    ahead = ranked[:keys.index(baseline.key())] if baseline.key() in keys else ranked
    return ahead[:k]


ORDER = random.SystemRandom()
"""Each round's runs in an order no job can predict: a run that leaves the machine worse for the
next process (page cache evicted, /dev/shm filled, a leftover thread) slows whichever arm follows,
as often the candidate itself as the baseline."""


def run_pairs(arms: list[Arm], run_one: Callable[[Arm, int, int], TrialResult], r: int, lengths: Lengths,
              order: random.Random = ORDER) -> list[Pair]:
    """One round: every arm at both lengths, the runs shuffled by ``order``."""
    runs = [(i, steps) for i in range(len(arms)) for steps in (lengths.long, lengths.short)]
    order.shuffle(runs)
    done = {(i, steps): run_one(arms[i], r, steps) for i, steps in runs}
    return [Pair(short=done[(i, lengths.short)], long=done[(i, lengths.long)]) for i in range(len(arms))]


def interleave(candidates: list[Candidate], baseline: Candidate, run_one: RunOne, *, rounds: Rounds,
               lengths: Lengths, floor: float, compare_steps: int,
               declared_startup: DeclaredStartup = lambda _: 0.0,
               untrusted: Untrusted = lambda _: False, reference: tuple[Pair, ...] = (),
               prior: SpreadPrior | None = None,
               order: random.Random = ORDER) -> tuple[list[Verdict], list[Pair]]:
    """Rerun baseline and candidates in rounds until each candidate is decided; verdicts and the
    baseline's pairs (``reference`` first: the baseline's pair doctor already measured at these
    lengths, which counts as a baseline round and is never run again). ``prior``: the spread of a
    round's job time doctor expects, which every job interval is moderated toward.

    A candidate leaves the rotation once it is promoted, has failed a rerun, breached the contract,
    cannot clear the floor (its upper bound is below it, or the rest of the rounds could not lift
    its lower bound past it if its speedup held: ``noise.futile``), or is slower than one already
    promoted. A candidate as fast as the baseline then costs ``least`` rounds, not ``most``.
    """
    arms = list({c.key(): c for c in candidates if c.key() != baseline.key()}.values())
    base_pairs: list[Pair] = list(reference)
    pairs: dict[str, list[Pair]] = {c.key(): [] for c in arms}
    verdicts: dict[str, Verdict] = {}
    active = list(arms)
    last_level = rounds.level(rounds.looks, len(arms))

    def run_round(r: int) -> None:
        base, *rest = run_pairs([baseline, *active], run_one, r, lengths, order)
        base_pairs.append(base)
        for arm, pair in zip(active, rest, strict=True):
            pairs[arm.key()].append(pair)

    def decided(done: int) -> bool:
        # Before `least` rounds only a failed rerun settles a candidate; speed is judged after.
        judged = active if done >= rounds.least else [a for a in active if any(map(_failed, pairs[a.key()][-1].runs))]
        level = rounds.level(rounds.look(done), len(arms))
        for arm in judged:
            others = tuple(pairs[a.key()] for a in arms if a.key() != arm.key())
            verdicts[arm.key()] = judge(arm, base_pairs, pairs[arm.key()], lengths=lengths, floor=floor,
                                        compare_steps=compare_steps, level=level, label=rounds.label(len(arms)),
                                        others=others, declared_startup_s=declared_startup(arm),
                                        untrusted=untrusted(arm), prior=prior, reference=len(reference))
        if done < rounds.least:
            active[:] = [a for a in active if a not in judged]
            return not active
        best = best_promoted(list(verdicts.values()))
        active[:] = [a for a in active if _undecided(verdicts[a.key()], floor, best, done, rounds.most, level, last_level)]
        return not active

    rounds.run(run_round, decided)
    return [verdicts[c.key()] for c in arms], base_pairs


def _failed(run: TrialResult) -> bool:
    """A rerun that says something against its candidate: a disturbed one (still disturbed after
    its own reruns, experiment/quiet.py) only lacks a measurement."""
    return not run.ok and run.status is not TrialStatus.DISTURBED


def _undecided(verdict: Verdict, floor: float, best: Verdict | None, done: int, most: int, level: float,
               last_level: float) -> bool:
    if verdict.promoted or verdict.contract or any(s not in ("ok", "disturbed") for s in verdict.statuses):
        return False
    measured = min(len(verdict.base_job_s), len(verdict.cand_job_s))  # a disturbed round measured nothing
    if verdict.job_speedup is None:
        # Disturbed rounds left too few measured for an interval: the next round may give one.
        return measured < 2 and done < most
    job = SpeedupInterval(*verdict.job_speedup)
    if job.high <= floor or futile(job, measured, measured + most - done, level, floor, last_level):
        return False
    return best is None or best.job_speedup is None or job.point > best.job_speedup[0]


def _interval(base: list[float], cand: list[float], confidence: float,
              others: tuple[list[float], ...] = (), prior: SpreadPrior | None = None) -> SpeedupInterval | None:
    if len(base) < 2 or len(cand) < 2:
        return None
    return pooled_speedup_interval(base, cand, confidence, others, prior)


def _measured(pairs: list[Pair], lengths: Lengths, startup_s: float | None = None) -> list[tuple[Pair, WholeProcess]]:
    """The rounds both of whose runs ended ok with their whole-process times."""
    out = []
    for pair in pairs:
        measured = whole_process(pair.short, pair.long, lengths, startup_s) if pair.ok else None
        if measured is not None:
            out.append((pair, measured))
    return out


def _record_steps(measured: list[tuple[Pair, WholeProcess]]) -> list[float]:
    """Each long run's mean measured step by its records: the steps between the short length and
    the long one, the same window as the whole-process difference (a periodic step included)."""
    return [statistics.fmean(p.long.step_times) for p, _ in measured if p.long.step_times]


def records_disagree(records: SpeedupInterval | None, whole: SpeedupInterval | None, floor: float) -> str:
    """Why the step records' per-step speed-up cannot be the whole processes' (empty when it can)."""
    if records is None or whole is None:
        return ""
    if whole.low / floor <= records.point <= whole.high * floor:
        return ""
    return (f"{RECORDS_DISAGREE}: its step records say {records.point:.3f}x per step, its whole processes "
            f"{whole.point:.3f}x [{whole.low:.3f}, {whole.high:.3f}]")


def judge(
    candidate: Candidate,
    base_pairs: list[Pair],
    cand_pairs: list[Pair],
    *,
    lengths: Lengths,
    floor: float,
    compare_steps: int,
    level: float = 0.95,
    label: str = "95% CI",
    others: tuple[list[Pair], ...] = (),
    declared_startup_s: float | None = 0.0,
    untrusted: bool = False,
    prior: SpreadPrior | None = None,
    reference: int = 0,
) -> Verdict:
    """Promote or not, and say why, from the interleaved reruns of one candidate.

    ``level``: this interval's confidence, the share of the error its caller gives this look
    (``Rounds.level``), named ``label`` in the reason. ``others``: the other candidates' pairs of
    the same rounds, whose spread is pooled with this one's and the baseline's
    (``noise.pooled_speedup_interval``); the job interval's is moderated toward ``prior``, the
    spread doctor expects of a round's job time (the per-step one, a difference of two runs, has
    its own). ``reference``: how many of ``base_pairs`` lead as doctor's rounds, left out when they
    drifted from the run's own (``drifted``).
    """
    cand_runs = [run for pair in cand_pairs for run in pair.runs]
    verdict = Verdict(candidate=candidate, promoted=False, reason="", statuses=[r.status.value for r in cand_runs])
    failed = [r for r in cand_runs if _failed(r)]
    if failed:
        verdict.reason = f"{len(failed)} of {len(cand_runs)} reruns ended {failed[0].status.value}: {failed[0].detail}".strip(": ")
        return verdict
    base, left_out = _baseline_rounds(base_pairs, lengths, reference, prior)
    startup = (statistics.median(m.startup_s for _, m in base) + declared_startup_s
               if untrusted and declared_startup_s is not None and base else None)
    cand = _measured(cand_pairs, lengths, startup)
    if len(base) < 2:
        verdict.reason = "fewer than two baseline rounds were measured (both lengths ok)"
        return verdict
    if not cand:
        verdict.reason = "every round of the candidate was disturbed by other processes: nothing measured"
        return verdict
    verdict.base_step_s = [m.step_s for _, m in base]
    verdict.cand_step_s = [m.step_s for _, m in cand]
    verdict.base_job_s = [m.job_s for _, m in base]
    verdict.cand_job_s = [m.job_s for _, m in cand]
    verdict.base_record_step_s = _record_steps(base)
    verdict.cand_record_step_s = _record_steps(cand)
    verdict.peak_bytes = max((r.peak_bytes or 0) for p, _ in cand for r in p.runs) or None
    base_losses = base[0][0].long.losses[:compare_steps]
    diffs = [abs(c - b) for p, _ in cand for c, b in zip(p.long.losses[:compare_steps], base_losses, strict=False)
             if math.isfinite(c) and math.isfinite(b)]
    verdict.max_loss_diff = max(diffs) if diffs else None
    moved = startup_problem([m.startup_s for _, m in base], [m.startup_s for _, m in cand],
                            declared_s=declared_startup_s)
    if moved:
        verdict.reason = moved
        return verdict
    pooled = [_measured(p, lengths) for p in others]
    job = _interval(verdict.base_job_s, verdict.cand_job_s, level, tuple([m.job_s for _, m in o] for o in pooled),
                    prior)
    step = _interval(verdict.base_step_s, verdict.cand_step_s, level, tuple([m.step_s for _, m in o] for o in pooled),
                     _per_step(prior, base, lengths))
    records = _interval(verdict.base_record_step_s, verdict.cand_record_step_s, level)
    verdict.job_speedup = _triple(job)
    verdict.step_speedup = _triple(step)
    verdict.record_step_speedup = _triple(records)
    verdict.contract = records_disagree(records, step, floor)
    rounds = f"over {len(cand)} rounds of whole processes"
    if verdict.contract:
        verdict.reason = f"contract: {verdict.contract}"
    elif job is None:
        verdict.reason = "too few rounds for an interval"
    elif job.clears(floor):
        verdict.promoted = True
        verdict.reason = f"speedup {job.point:.3f}x, {label} [{job.low:.3f}, {job.high:.3f}] {rounds} clears the promotion floor {floor:.3f}"
    else:
        verdict.reason = f"speedup {job.point:.3f}x, {label} [{job.low:.3f}, {job.high:.3f}] {rounds} does not clear the promotion floor {floor:.3f}"
    verdict.reason += left_out
    return verdict


DRIFT_LEVEL = 0.90
"""Doctor's baseline round is left out when its job time lies outside this prediction interval of
the run's own baseline rounds: the machine's pace moved between doctor and verification (the first
A/A campaign of issue 49: doctor's pair projected 62 s of job, the run's own rounds 41-46 s). Kept,
a drifted round biases the baseline and widens every interval; left out, a sound one costs a round's
degrees of freedom, so the check is strict: at 0.99 it kept rounds 11-33% off two rounds of the
run's own that agreed within 7%, and their intervals were the widest of the README runs
(docs/benchmarks.md, round five)."""


def drifted(reference_s: float, own_s: list[float], prior: SpreadPrior | None = None) -> bool:
    """Whether ``reference_s`` (doctor's round's job time) is not one more of ``own_s`` (the run's
    own baseline rounds): outside their ``DRIFT_LEVEL`` prediction interval on log-times, their
    spread moderated toward ``prior`` as every interval's is. Never with fewer than two rounds."""
    logs = [math.log(x) for x in own_s]
    if len(logs) < 2:
        return False
    mean = statistics.fmean(logs)
    df, ss = len(logs) - 1, sum((x - mean) ** 2 for x in logs)
    if prior is not None and prior.df > 0 and prior.cv > 0:
        df, ss = df + prior.df, ss + prior.df * prior.cv ** 2
    if ss == 0:
        return math.log(reference_s) != mean
    half = t_quantile(0.5 + DRIFT_LEVEL / 2, df) * math.sqrt(ss / df * (1 + 1 / len(logs)))
    return abs(math.log(reference_s) - mean) > half


def _baseline_rounds(base_pairs: list[Pair], lengths: Lengths, reference: int,
                     prior: SpreadPrior | None) -> tuple[list[tuple[Pair, WholeProcess]], str]:
    """The measured baseline rounds a verdict uses, and why doctor's (the first ``reference``) were
    left out ("" when they were not): they drifted from the run's own (``drifted``)."""
    ref, own = _measured(base_pairs[:reference], lengths), _measured(base_pairs[reference:], lengths)
    own_s = [m.job_s for _, m in own]
    moved = [m.job_s for _, m in ref if drifted(m.job_s, own_s, prior)]
    if not moved:
        return ref + own, ""
    return own, (f"; doctor's baseline round ({moved[0]:.1f} s of job) left out: the machine's pace moved since "
                 f"doctor (this run's own rounds {min(own_s):.1f}-{max(own_s):.1f} s)")


def _per_step(prior: SpreadPrior | None, base: list[tuple[Pair, WholeProcess]], lengths: Lengths) -> SpreadPrior | None:
    """The spread doctor expects of one round's job time, as a spread of its per-step figure: the
    job is the short run plus the rest of the planned steps at that pace, so the pace's spread is
    the job's scaled by the job over the steps' share of it. The per-step interval is moderated
    toward it as the job's is: unmoderated, two or three rounds that agree by chance made an honest
    job's step records fall outside it (a contract breach) in up to one verification in a hundred
    of simulated honest jobs (``bench/verification_sim.py``; docs/benchmarks.md, round four)."""
    if prior is None or not base:
        return None
    job_s = statistics.median(m.job_s for _, m in base)
    steps_s = (lengths.planned - lengths.short) * statistics.median(m.step_s for _, m in base)
    return SpreadPrior(cv=prior.cv * job_s / steps_s, df=prior.df) if steps_s > 0 else None


def _triple(interval: SpeedupInterval | None) -> tuple[float, float, float] | None:
    return (interval.point, interval.low, interval.high) if interval else None


def best_promoted(verdicts: list[Verdict]) -> Verdict | None:
    """Among candidates whose whole interval cleared the floor, the fastest by point estimate: a wider
    interval means noisier reruns, not a slower candidate (the lower bound only breaks ties)."""
    promoted = [(v, v.job_speedup) for v in verdicts if v.promoted and v.job_speedup]
    return max(promoted, key=lambda vj: (vj[1][0], vj[1][1]))[0] if promoted else None
