"""verify: re-check later that a promoted commit is still faster than its base, under the same contract.

Base and REV are checked out in temporary worktrees (the user's tree is untouched) and run
interleaved with their own defaults, which is what the commit changed, each at two lengths per
round and judged on whole processes as a run's verification is (infrarsi/whole_process.py). Usable
in CI: the CLI exits non-zero when the recorded speedup no longer holds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import cast

import git

from infrarsi import vcs
from infrarsi.events import Event, EventSink, ignore
from infrarsi.experiment.trial_runner import TrialArgs, TrialRunner, normal_background
from infrarsi.noise import PROMOTION_FLOOR, SpeedupInterval, futile, speedup_interval
from infrarsi.project import PreparedRepo
from infrarsi.records.evidence import NOTES_REF, CommitEvidence
from infrarsi.records.files import verify_logs_dir
from infrarsi.runner.sandbox import bwrap_problem, mode_words
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.whole_process import Lengths, Pair, Rounds, WholeProcess, run_pairs, whole_process


class VerifyStatus(StrEnum):
    HOLDS = "holds"
    REGRESSED = "regressed"
    """The reruns do not clear the floor, or fall short of the recorded speed-up."""
    FAILED = "failed"
    """A rerun did not end ok (for a reason of its own: a disturbed one only lacks a measurement)."""
    UNDECIDED = "undecided"
    """Too few rounds ran undisturbed to judge: the machine stayed busy."""
    ERROR = "error"


@dataclass(kw_only=True, slots=True)
class VerifyResult:
    status: VerifyStatus
    message: str
    base: str = ""
    rev: str = ""
    recorded: tuple[float, float, float] | None = None
    """(point, low, high) from the commit's evidence note, when ``apply`` made it."""
    speedup: tuple[float, float, float] | None = None
    floor: float = PROMOTION_FLOOR
    """What the speedup's interval must clear (see ``infrarsi.noise``)."""
    base_job_s: list[float] = field(default_factory=list)
    """Whole-process projected job seconds of each round (both lengths measured)."""
    rev_job_s: list[float] = field(default_factory=list)
    rounds: int = 0
    statuses: list[str] = field(default_factory=list)
    sandbox: str = ""
    """How the reruns ran: bubblewrap, or off (--no-sandbox)."""

    def to_dict(self) -> dict:
        return asdict(self)


def recorded_speedup(place: vcs.GitPlace, sha: str) -> tuple[float, float, float] | None:
    """The speed-up ``apply`` recorded beside the commit; None for a commit it did not make."""
    note = vcs.read_note(place, sha, NOTES_REF)
    evidence = CommitEvidence.from_json(note) if note is not None else None
    return evidence.job_speedup if evidence is not None else None


def verify(repo: Path, rev: str, *, rounds: Rounds | None = None, on_event: EventSink = ignore,
           sandbox: bool = True) -> VerifyResult:
    """Base and REV interleaved until the interval decides (see :class:`Rounds`; by default the
    contract's ``[verify]`` table's) or a rerun fails."""
    repo = Path(repo).resolve()
    # doctor's profile only lends verify its normal background and lengths: without a readable one it runs on its own
    prepared = PreparedRepo.open(repo, unreadable_doctor_as_missing=True)
    contract, doctored = prepared.contract, prepared.doctor
    rounds = rounds or Rounds.of(contract.verify_policy)
    problem = bwrap_problem() if sandbox else None
    if problem:
        return VerifyResult(status=VerifyStatus.ERROR, message=problem, sandbox=mode_words(sandbox))
    place = vcs.locate(repo)
    if place is None:
        return VerifyResult(status=VerifyStatus.ERROR, message=f"{repo} is not in a git repository")
    try:
        commit = place.repo.commit(rev)
    except (git.BadName, ValueError):
        return VerifyResult(status=VerifyStatus.ERROR, message=f"unknown revision {rev!r} in {place.root}")
    base = contract.base_commit or (commit.parents[0].hexsha if commit.parents else "")
    if not base:
        return VerifyResult(status=VerifyStatus.ERROR, message=f"{rev} has no parent and the contract records no base commit")
    result = VerifyResult(status=VerifyStatus.FAILED, message="", base=base, rev=commit.hexsha,
                          recorded=recorded_speedup(place, commit.hexsha), sandbox=mode_words(sandbox))
    log_root = verify_logs_dir(repo)
    runs: dict[str, list[TrialResult]] = {"base": [], "rev": []}
    pairs: dict[str, list[Pair]] = {"base": [], "rev": []}
    background = normal_background(doctored)
    lengths = Lengths.recorded(contract.workload, doctored.verification_steps if doctored else [])
    on_event(Event(stage="verify", kind="begin", message=f"{rounds.least}-{rounds.most} interleaved rounds of base and {rev}",
                   done=0, total=4 * rounds.most))
    with vcs.worktree(place, base) as base_tree, vcs.worktree(place, commit.hexsha) as rev_tree:
        # verify has no --wait-for-quiet: a disturbed run is rerun at once.
        runners = {arm: TrialRunner.for_stage(tree, contract, "verify", background=background, sandbox=sandbox,
                                              on_event=on_event)
                   for arm, tree in (("base", base_tree), ("rev", rev_tree))}

        def run_one(arm: str, r: int, steps: int) -> TrialResult:
            # An empty candidate runs each tree with its own defaults: what the commit changed. A
            # disturbed round is repeated, not widening the interval.
            out = runners[arm].run(TrialArgs(candidate=Candidate(), name=f"{arm} round {r + 1}", steps=steps,
                                             log_dir=log_root / f"{arm}-{r}-{steps}")).result
            runs[arm].append(out)
            on_event(Event(stage="verify", kind="report", message=f"{arm} round {r + 1}, {steps} steps: {out.status.value}",
                           done=len(runs["base"]) + len(runs["rev"]), total=4 * rounds.most))
            return out

        def run_round(r: int) -> None:
            for arm, pair in zip(("base", "rev"), run_pairs(["base", "rev"], run_one, r, lengths), strict=True):
                pairs[arm].append(pair)

        def decided(done: int) -> bool:
            if _failed(runs["base"] + runs["rev"]):
                return True
            if done < rounds.least:
                return False
            _judge(result, pairs, lengths, rounds, done)
            if result.status is VerifyStatus.UNDECIDED:
                return False  # the rounds left may run undisturbed
            if result.status is VerifyStatus.FAILED:
                return True  # no interval to grow: a rerun gave no whole-process time
            return result.status is VerifyStatus.HOLDS or not could_hold(result, done, rounds)

        result.rounds = rounds.run(run_round, decided)
    result.statuses = [t.status.value for t in runs["base"] + runs["rev"]]
    bad = _failed(runs["base"] + runs["rev"])
    if bad:
        result.status = VerifyStatus.FAILED
        result.message = f"a rerun ended {bad[0].status.value}: {bad[0].detail[-200:]}"
    on_event(Event(stage="verify", kind="end", message=result.message))
    return result


def _failed(runs: list[TrialResult]) -> list[TrialResult]:
    """The reruns that say something against the commit or its base: one still disturbed after its
    own reruns (experiment/quiet.py) only lacks a measurement, and its round is left out."""
    return [t for t in runs if not t.ok and t.status is not TrialStatus.DISTURBED]


def _judge(result: VerifyResult, pairs: dict[str, list[Pair]], lengths: Lengths, rounds: Rounds, done: int) -> None:
    quiet_rounds = [r for r, (b, c) in enumerate(zip(pairs["base"], pairs["rev"], strict=True)) if b.ok and c.ok]
    if len(quiet_rounds) < 2:
        result.status = VerifyStatus.UNDECIDED
        result.message = (f"{len(quiet_rounds)} of {len(pairs['base'])} rounds ran undisturbed, too few to judge: "
                          "the machine stayed busy; verify again on a quieter machine")
        return
    measured = {arm: [whole_process(arm_pairs[r].short, arm_pairs[r].long, lengths) for r in quiet_rounds]
                for arm, arm_pairs in pairs.items()}
    if any(m is None for ms in measured.values() for m in ms):
        result.status = VerifyStatus.FAILED
        result.message = "a rerun did not stop when told to: no whole-process time"
        return
    timed = cast(dict[str, list[WholeProcess]], measured)  # none is None (above)
    result.base_job_s = [m.job_s for m in timed["base"]]
    result.rev_job_s = [m.job_s for m in timed["rev"]]
    interval = speedup_interval(result.base_job_s, result.rev_job_s, rounds.level(rounds.look(done)))
    result.speedup = cast(tuple[float, float, float], tuple(interval))
    holds = interval.low > result.floor and (result.recorded is None or interval.high >= result.recorded[1])
    result.status = VerifyStatus.HOLDS if holds else VerifyStatus.REGRESSED
    said = f"; recorded {result.recorded[0]:.2f}x" if result.recorded else ""
    result.message = (f"{'holds' if holds else 'does not hold'}: {interval.point:.2f}x, {rounds.label()} "
                      f"[{interval.low:.2f}, {interval.high:.2f}] over {len(result.rev_job_s)} rounds "
                      f"vs promotion floor {result.floor:.3f}{said} (whole processes)")


def could_hold(result: VerifyResult, done: int, rounds: Rounds) -> bool:
    """Whether more rounds could still make it hold: the interval reaches above the floor and the record,
    and the rounds left could lift its low past the floor if its point held (``noise.futile``, as
    the run's re-verification judges its candidates). ``done`` rounds ran, some maybe disturbed."""
    interval = SpeedupInterval(*cast(tuple[float, float, float], result.speedup))
    measured = len(result.rev_job_s)
    return (interval.high > result.floor and (result.recorded is None or interval.high >= result.recorded[1])
            and not futile(interval, measured, measured + rounds.most - done, rounds.level(rounds.look(done)),
                           result.floor, rounds.level(rounds.looks)))
