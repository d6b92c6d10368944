"""An expert's grid against ``infrarsi optimize --trials 20``, per repo: does the search find the
speed a performance engineer would find by hand?

For each repo (the corpus entries in ``../shared/corpus`` and the fixtures), on its own copy:

1. ``init -- <command>`` and ``doctor --repeats 2``, as a user would.
2. **The expert**: the points of ``bench/expert_grids.toml`` (launch flags, environment, hand edits
   of the code; only what the repo's ``[truth]`` table calls legitimate), each on its own copy of the
   repo, all run interleaved with the baseline for ``--rounds`` rounds at verification's two lengths
   and judged by the run's own rule on whole processes (``infrarsi.whole_process.judge``: the job
   speed-up's 95% interval). Every point keeps doctor's loss check. The expert's best is the fastest
   point whose interval clears the promotion floor.
3. **InfraRSI**: ``optimize --trials 20 --no-bank`` on a fresh copy; its promoted job speed-up, the
   trials it spent, the waste (seconds of trials that did not end ``ok`` over all trial seconds) and
   its false aborts: each ``aborted_slow`` candidate rerun to the end with no bound, counted false
   when its steps were not above the bound it was stopped by.

    python -m bench.expert [--only NAME …] [--rounds 3] [--trials 20] [--corpus DIR]

Run it with the interpreter the trials should use (the corpus's venv, with InfraRSI installed in
it: ``pip install -e .``); one row per repo, the table at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.corpus import GIT, run_cli
from infrarsi.commandline import parse_command, without_flag
from infrarsi.contract import Contract, KnobValue, check_locked_files, require_intact
from infrarsi.noise import PROMOTION_FLOOR
from infrarsi.records import load_doctor, load_run
from infrarsi.records.verdict import Verdict
from infrarsi.runner.abort import MARGIN
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.whole_process import Lengths, Pair, judge

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GRIDS = HERE / "expert_grids.toml"
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
FIXTURES = ROOT / "fixtures"
BOUND = re.compile(r"the bound ([0-9.e+-]+) s")


@dataclass(slots=True)
class Repo:
    name: str
    source: Path
    command: list[str]
    workdir: str = "."


@dataclass(slots=True)
class Arm:
    """One point of the grid: its copy of the repo, its contract (command and environment), its
    knob values."""

    name: str
    repo: Path
    contract: Contract
    candidate: Candidate
    pairs: list[Pair] = field(default_factory=list)


@dataclass(slots=True)
class Outcome:
    name: str
    expert: str = "—"
    expert_speedup: tuple[float, float, float] | None = None
    expert_clears: bool = False
    points: list[str] = field(default_factory=list)
    rounds: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    """Per point: the whole-process job seconds of each round, the baseline's and its own."""
    infrarsi: str = "—"
    infrarsi_speedup: tuple[float, float, float] | None = None
    trials: int = 0
    waste: float | None = None
    aborted: int = 0
    false_aborts: int = 0
    problems: list[str] = field(default_factory=list)
    trial_rows: list[dict] = field(default_factory=list)
    """InfraRSI's trials as its run recorded them (candidate, status, step time, cost, why)."""
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if not self.expert_speedup:
            return None
        found = self.infrarsi_speedup[0] if self.infrarsi_speedup else 1.0
        return found / self.expert_speedup[0]


def repos(corpus: Path, grids: dict) -> list[Repo]:
    out = []
    for name, grid in grids.items():
        spec_path = corpus / name / "CORPUS.toml"
        if spec_path.exists():
            spec = tomllib.loads(spec_path.read_text())
            env = [f"{k}={v}" for k, v in (spec.get("env") or {}).items()]
            out.append(Repo(name, corpus / name, [*env, *shlex.split(spec["command"])], spec.get("workdir", ".")))
        elif (FIXTURES / name).is_dir():
            out.append(Repo(name, FIXTURES / name, shlex.split(grid["command"])))
    return out


def fresh_copy(repo: Repo, where: Path) -> Path:
    copy = where / repo.name
    shutil.copytree(repo.source, copy, ignore=shutil.ignore_patterns("__pycache__", ".infrarsi"))
    subprocess.run(["git", "init", "-q", str(copy)], check=True)
    subprocess.run([*GIT, "-C", str(copy), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(copy), "commit", "-qm", "as published"], check=True)
    return copy


def _typed(contract: Contract, name: str, text: str) -> KnobValue:
    knob = contract.knob(name)
    if knob.type == "bool":
        return text.lower() in ("1", "true", "yes", "on")
    if knob.type in ("int", "float"):
        return int(text) if knob.type == "int" else float(text)
    return text


def _knob_for(contract: Contract, flag: str, *, env: bool) -> str | None:
    for knob in contract.knobs:
        if env and knob.flag_style == "env" and knob.flag == flag:
            return knob.name
        if not env and knob.flag_style != "env" and knob.flag and knob.flag.replace("_", "-") == flag.replace("_", "-"):
            return knob.name
    return None


def _with_flag(command: list[str], flag: str, value: str) -> list[str]:
    parsed = parse_command(command)
    tail, at = without_flag(list(parsed.script_args), {flag}, True)
    at = len(tail) if at is None else at
    return [*parsed.head, parsed.target_text, *tail[:at], flag, value, *tail[at:]]


def make_arm(name: str, moves: list[dict], base: Path, contract: Contract, baseline: Candidate, where: Path) -> Arm:
    """The point's copy of the repo (its hand edits made), contract and candidate; ValueError when
    an edit does not apply once or touches a locked file."""
    copy = where / name
    shutil.copytree(base, copy, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    knobs = dict(baseline.knobs)
    workload = contract.workload
    command, env = list(workload.command), dict(workload.env)
    for move in moves:
        for flag, value in (move.get("flags") or {}).items():
            knob = _knob_for(contract, flag, env=False)
            if knob is not None:
                knobs[knob] = _typed(contract, knob, value)
            else:
                command = _with_flag(command, flag, value)
        for var, value in (move.get("env") or {}).items():
            knob = _knob_for(contract, var, env=True)
            if knob is not None:
                knobs[knob] = _typed(contract, knob, value)
            else:
                env[var] = value
        for edit in move.get("edits") or []:
            path = copy / edit["file"]
            text = path.read_text()
            if text.count(edit["old"]) != 1:
                raise ValueError(f"{edit['file']}: {edit['old']!r} occurs {text.count(edit['old'])} times, not once")
            path.write_text(text.replace(edit["old"], edit["new"]))
    locked = check_locked_files(contract, copy)
    if locked:
        raise ValueError(f"edits locked file {locked[0].path}")
    arm_contract = dataclasses.replace(contract, workload=dataclasses.replace(workload, command=command, env=env))
    return Arm(name, copy, arm_contract, Candidate(knobs=knobs, patches=()))


def measure_grid(base: Path, grid: dict, rounds: int, where: Path,
                 console: Console) -> tuple[list[tuple[Arm, Verdict]], list[str]]:
    """Each point's verdict against the baseline, and the points that could not be made."""
    contract = require_intact(base)
    doctor = load_doctor(base)
    if doctor is None:
        raise ValueError("doctor left no record")
    baseline = Candidate(knobs={k.name: k.default for k in contract.tunable})
    lengths = Lengths.recorded(contract.workload, doctor.verification_steps)
    problems: list[str] = []
    base_arm = Arm("baseline", base, contract, baseline)
    arms = []
    for point in grid["points"]:
        label = "+".join(point)
        try:
            arms.append(make_arm(label, [grid["moves"][m] for m in point], base, contract, baseline, where))
        except (ValueError, KeyError) as error:
            problems.append(f"{label}: {error}")

    def run(arm: Arm, steps: int) -> TrialResult:
        spec = TrialSpec(repo=arm.repo, contract=arm.contract, candidate=arm.candidate, steps=steps,
                         reference_checksums=doctor.checksums, reassociation_drift=doctor.reassociation_drift,
                         background=doctor.background)
        return run_trial(spec)

    for r in range(rounds):
        order = [base_arm, *arms]
        longs = [run(arm, lengths.long) for arm in order]
        shorts = [run(arm, lengths.short) for arm in order]
        for arm, lo, sh in zip(order, longs, shorts, strict=True):
            arm.pairs.append(Pair(short=sh, long=lo))
        console.print(f"  round {r + 1}/{rounds}: " + ", ".join(
            f"{a.name} {p.long.status.value}" for a, p in zip(order, [a.pairs[-1] for a in order], strict=True)))
    verdicts = [(arm, judge(arm.candidate, base_arm.pairs, arm.pairs, lengths=lengths, floor=PROMOTION_FLOOR,
                            compare_steps=contract.loss.compare_steps)) for arm in arms]
    return verdicts, problems


def false_aborts(copy: Path, timeout: float) -> tuple[int, int]:
    """(aborted_slow trials of the run, those whose candidate, run to the end, was not above the bound)."""
    run = load_run(copy)
    contract = require_intact(copy)
    doctor = load_doctor(copy)
    aborted = [t for t in (run.trials if run else []) if t.status == TrialStatus.ABORTED_SLOW.value]
    false = 0
    for row in aborted:
        bound = BOUND.search(row.detail)
        if bound is None:
            continue
        spec = TrialSpec(repo=copy, contract=contract, candidate=Candidate.from_dict(row.candidate),
                         reference_checksums=doctor.checksums if doctor else {},
                         reassociation_drift=doctor.reassociation_drift if doctor else {},
                         background=doctor.background if doctor else None, timeout_s=timeout)
        rerun = run_trial(spec)
        if rerun.ok and rerun.step_time <= float(bound.group(1)) * (1 + MARGIN):
            false += 1
    return len(aborted), false


def run_repo(repo: Repo, grid: dict, *, python: str, rounds: int, trials: int, timeout: float,
             console: Console) -> Outcome:
    out = Outcome(repo.name)
    tmp = Path(tempfile.mkdtemp(prefix=f"expert-{repo.name}-"))
    try:
        expert_dir, ours_dir, arms_dir = tmp / "expert", tmp / "infrarsi", tmp / "arms"
        for d in (expert_dir, ours_dir, arms_dir):
            d.mkdir()
        base = fresh_copy(repo, expert_dir)
        t0 = time.perf_counter()
        rc, init, tail = run_cli(python, ["init", str(base), "--json", "--", *repo.command], base / repo.workdir, timeout)
        if rc != 0:
            out.problems.append(f"init: {(init or {}).get('message') or tail}")
            return out
        rc, _, tail = run_cli(python, ["doctor", str(base), "--repeats", "2", "--json"], base / repo.workdir, timeout)
        if rc != 0:
            out.problems.append(f"doctor: {tail}")
            return out
        verdicts, problems = measure_grid(base, grid, rounds, arms_dir, console)
        out.problems += problems
        out.seconds["expert"] = time.perf_counter() - t0
        for arm, verdict in verdicts:
            job = verdict.job_speedup
            text = f"{job[0]:.2f}x [{job[1]:.2f}, {job[2]:.2f}]" if job else "—"
            out.points.append(f"{arm.name} {text} {','.join(sorted(set(verdict.statuses)))}")
            out.rounds[arm.name] = {"baseline": verdict.base_job_s, "point": verdict.cand_job_s}
            if not job:
                out.problems.append(f"{arm.name}: {verdict.reason[:300]}")
            fine = job is not None and set(verdict.statuses) <= {"ok", "disturbed"}  # disturbed: unmeasured
            if fine and (out.expert_speedup is None or job[0] > out.expert_speedup[0]):
                out.expert, out.expert_speedup = arm.name, job
        out.expert_clears = bool(out.expert_speedup and out.expert_speedup[1] > PROMOTION_FLOOR)

        ours = fresh_copy(repo, ours_dir)
        t0 = time.perf_counter()
        rc, _, tail = run_cli(python, ["optimize", str(ours), "faster", "--trials", str(trials), "--no-bank",
                                          "--json", "--", *repo.command], ours / repo.workdir, timeout * 4)
        out.seconds["infrarsi"] = time.perf_counter() - t0
        run = load_run(ours)
        if run is None:
            out.problems.append(f"optimize: {tail or f'exit {rc}'}")
            return out
        out.trial_rows = [{"number": t.number, "kind": t.kind, "status": t.status, "candidate": t.candidate,
                           "step_s": t.step_s, "wall_s": t.wall_s, "reason": t.reason, "detail": t.detail[-240:]}
                          for t in run.trials]
        searched = [t for t in run.trials if t.kind not in ("verification",)]
        out.trials = len(searched)
        spent = sum(t.wall_s for t in searched)
        out.waste = sum(t.wall_s for t in searched if t.status != "ok") / spent if spent else None
        if run.promoted is not None and run.promoted.job_speedup:
            out.infrarsi_speedup = run.promoted.job_speedup
            out.infrarsi = _describe(run.promoted.candidate, require_intact(ours))
        else:
            out.infrarsi = f"nothing promoted ({run.message[:80]})"
        out.aborted, out.false_aborts = false_aborts(ours, timeout)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _describe(candidate: Candidate, contract: Contract) -> str:
    moved = [f"{k}={v}" for k, v in candidate.knobs.items() if v != contract.knob(k).default]
    return ", ".join([*moved, *candidate.patches]) or "baseline"


def _x(interval: tuple[float, float, float] | None) -> str:
    return f"{interval[0]:.2f}x [{interval[1]:.2f}, {interval[2]:.2f}]" if interval else "—"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--only", nargs="*", metavar="NAME")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the expert's grid")
    parser.add_argument("--trials", type=int, default=20, help="optimize's search trials")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per stage")
    parser.add_argument("--json", type=Path, help="also write the outcomes here")
    args = parser.parse_args()
    grids = tomllib.loads(GRIDS.read_text())
    chosen = [r for r in repos(args.corpus, grids) if not args.only or r.name in args.only]
    console = Console(width=200)
    outcomes = []
    for repo in chosen:
        console.print(f"[bold]{repo.name}[/]: {shlex.join(repo.command)}")
        outcome = run_repo(repo, grids[repo.name], python=sys.executable, rounds=args.rounds, trials=args.trials,
                           timeout=args.timeout, console=console)
        console.print(f"  expert: {'; '.join(outcome.points)}\n  infrarsi: {outcome.infrarsi} {_x(outcome.infrarsi_speedup)}"
                      + (f"\n  problems: {'; '.join(outcome.problems)}" if outcome.problems else ""))
        outcomes.append(outcome)
    table = Table(title=f"expert's grid ({args.rounds} interleaved rounds) vs optimize --trials {args.trials}")
    for column in ("repo", "expert's best", "job speed-up", "InfraRSI promoted", "job speed-up", "ratio",
                   "trials", "waste", "false aborts"):
        table.add_column(column)
    for o in outcomes:
        ratio = "—" if o.ratio is None else f"{o.ratio:.2f}" + ("" if o.expert_clears else " (expert within noise)")
        table.add_row(o.name, o.expert, _x(o.expert_speedup), o.infrarsi, _x(o.infrarsi_speedup), ratio,
                      str(o.trials), "—" if o.waste is None else f"{o.waste:.0%}", f"{o.false_aborts}/{o.aborted}")
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(o) for o in outcomes], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
