"""Verification's rule on simulated whole processes: how often it promotes, what it costs, how wide.

The product's own decision code (``Lengths.round_cv``, ``Rounds.sized``, ``interleave``, ``judge``,
``noise.step_noise``, ``search.history.believable_gain``) runs on whole-process times drawn from a
noise model instead of real processes, so hundreds of verifications take seconds. What it can show:
how the rule's choices (the rounds it plans, the error each look spends, the priors it moderates
toward) trade false promotions, power, launches and the interval's width, on a machine whose noise
is known. What it cannot: whether real processes follow the model (bench/proof.py runs the real
job for that).

The noise model, per run: a start-up of ``STARTUP_S`` with a spread of ``STARTUP_SD_S``; a pace
the process keeps for its whole life (log-normal, ``--pace-cv``; issue 49's A/A campaigns measured
2-5% process to process); a factor every run of a round shares (log-normal, ``--round-cv``: the
machine's pace drifting between rounds); 3% jitter per step. Doctor is simulated as it runs (two
runs of the contract's length, verification's long run, then its short one, a new machine factor
between each pair) and its prior and noise floor computed by the product's functions; the search's
estimate is one contract-length run of each arm, projected as the search projects it. The search's
winner's curse (its best of many noisy trials) is not modelled.

    PYTHONPATH=. .venv/bin/python -m bench.verification_sim [--reps 400] [--seed 7]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from infrarsi import noise
from infrarsi.contract import VerifyPolicy
from infrarsi.search.history import believable_gain
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.whole_process import Lengths, Pair, Rounds, interleave

STARTUP_S, STARTUP_SD_S, EXIT_S = 6.0, 0.15, 0.3
STEP_S, STEP_JITTER = 0.18, 0.03
WARMUP, MEASURED, PLANNED, LONG = 3, 10, 200, 58
"""The README job's shape on the 2-core machine (docs/benchmarks.md, issue 49's runs)."""
BASE, CAND = Candidate(), Candidate(knobs={"micro_batch_size": 16})


@dataclass
class Machine:
    rng: random.Random
    pace_cv: float
    round_cv: float
    factor: float = 1.0

    def next_round(self) -> None:
        self.factor = math.exp(self.rng.gauss(0, self.round_cv))

    def run(self, candidate: Candidate, step_s: float, steps: int) -> TrialResult:
        pace = step_s * self.factor * math.exp(self.rng.gauss(0, self.pace_cv))
        times = [pace * math.exp(self.rng.gauss(0, STEP_JITTER)) for _ in range(steps)]
        startup = STARTUP_S + self.rng.gauss(0, STARTUP_SD_S)
        stopped = startup + sum(times)
        return TrialResult(status=TrialStatus.OK, candidate=candidate, step_times=times[WARMUP:],
                           warmup_times=times[:WARMUP], losses=[1.0] * steps, startup_s=startup,
                           stopped_s=stopped, process_s=stopped + EXIT_S, steps_run=steps)


@dataclass(frozen=True)
class Outcome:
    promoted: bool
    breach: bool
    launches: int
    rounds: int
    hi_lo: float | None


def doctor(machine: Machine, lengths: Lengths) -> tuple[noise.SpreadPrior, tuple[Pair, ...], float]:
    """The prior, the reference pair and the noise floor, as doctor computes them from its runs."""
    machine.next_round()
    runs = [machine.run(BASE, STEP_S, WARMUP + MEASURED) for _ in range(2)]
    machine.next_round()
    runs.append(machine.run(BASE, STEP_S, lengths.long))
    short = machine.run(BASE, STEP_S, lengths.short)
    medians = [statistics.median(r.step_times) for r in runs]
    cv = lengths.round_cv(step_s=statistics.median(s for r in runs for s in r.step_times),
                          startup_s=statistics.median(r.startup_s or 0.0 for r in runs),
                          process_sd_s=statistics.stdev(r.startup_s or 0.0 for r in runs[1:]),
                          step_cv=noise.cv(medians))
    floor = noise.step_noise([r.step_times for r in runs]).min_speedup
    return noise.SpreadPrior(cv=cv, df=len(runs) - 1), (Pair(short=short, long=runs[-1]),), floor


def verification(rng: random.Random, gain: float, pace_cv: float, round_cv: float, plan_for_search: bool) -> Outcome:
    machine = Machine(rng, pace_cv, round_cv)
    lengths = Lengths(short=WARMUP, long=LONG, planned=PLANNED)
    prior, reference, floor = doctor(machine, lengths)
    machine.next_round()
    searched = [machine.run(BASE, STEP_S, WARMUP + MEASURED), machine.run(CAND, STEP_S / gain, WARMUP + MEASURED)]
    planned = believable_gain(searched, [CAND], BASE, PLANNED, floor) if plan_for_search else None
    rounds = Rounds.sized(VerifyPolicy(), prior, noise.PROMOTION_FLOOR, reference=len(reference), gain=planned)
    seen, launches = [-1], [0]

    def run_one(candidate: Candidate, r: int, steps: int) -> TrialResult:
        if r != seen[0]:
            seen[0] = r
            machine.next_round()
        launches[0] += 1
        return machine.run(candidate, STEP_S / (gain if candidate == CAND else 1.0), steps)

    (verdict,), base_pairs = interleave([CAND], BASE, run_one, rounds=rounds, lengths=lengths,
                                        floor=noise.PROMOTION_FLOOR, compare_steps=WARMUP, reference=reference,
                                        prior=prior, order=random.Random(rng.random()))
    job = verdict.job_speedup
    return Outcome(promoted=verdict.promoted, breach=bool(verdict.contract), launches=launches[0],
                   rounds=len(base_pairs) - len(reference), hi_lo=job[2] / job[1] if job and verdict.promoted else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--plan-for", choices=("search", "target"), default="search",
                        help="plan the rounds for the gain the search measured (the product's rule) or for TARGET_GAIN")
    args = parser.parse_args()
    table = Table(title=f"verification on simulated whole processes, {args.reps} verifications a row, "
                        f"rounds planned for {'the search' if args.plan_for == 'search' else 'TARGET_GAIN'}")
    for column in ("pace cv", "round cv", "gain", "promoted", "breach", "launches", "rounds", "hi/lo"):
        table.add_column(column, justify="right")
    for pace_cv, round_cv in ((0.02, 0.0), (0.03, 0.05)):
        for gain in (1.0, 1.05, 1.10, 1.20, 1.40):
            rng = random.Random(args.seed)
            out = [verification(rng, gain, pace_cv, round_cv, args.plan_for == "search") for _ in range(args.reps)]
            widths = [o.hi_lo for o in out if o.hi_lo is not None]
            table.add_row(f"{pace_cv:.2f}", f"{round_cv:.2f}", f"{gain:.2f}",
                          f"{sum(o.promoted for o in out) / len(out):.1%}", f"{sum(o.breach for o in out) / len(out):.1%}",
                          f"{statistics.fmean(o.launches for o in out):.1f}", f"{statistics.fmean(o.rounds for o in out):.2f}",
                          f"{statistics.median(widths):.3f}" if widths else "-")
    Console(width=120).print(table)
    print("promoted, breach (a contract breach of an honest job): share of verifications; launches, rounds: "
          "means; hi/lo: median over the promoted")


if __name__ == "__main__":
    main()
