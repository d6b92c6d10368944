"""What proving an answer costs, and whether the proof can fail (issue 49).

    .venv/bin/python -m bench.proof [--out DIR] job [--repeats 1] [--startup-wait-s S] [--trials 20]
    .venv/bin/python -m bench.proof [--out DIR] campaigns (--move threads=2 | --noop-patch) [--campaigns 20]
        [--trials 3] [--owner-args "--micro_batch_size=2"]

``job``: the README's main job as a new user runs it: a fresh copy of fixtures/dense_gpt in a new git
repo, then ``infrarsi optimize COPY "faster" --no-bank --json``. With ``--startup-wait-s S`` the
owner's command is the fixture's ``train.py --load_wait_s=S``: S seconds before its first step,
standing in for a GPU job's checkpoint load, NCCL set-up and compilation. Prints per stage (doctor,
the search, verification) the processes launched and their wall seconds, the proof against the
search, and the promoted candidate with its interval (hi/lo is the interval's width).

``campaigns``: the production path end to end (``infrarsi init``, ``doctor``, ``run --no-bank``), each
campaign on its own fresh copy with its own doctor and study, the contract narrowed to one move
(``--move knob=value``: every other knob fixed, no editable file, so no patch). A no-op move
(``threads=2`` on a 2-core machine, where it is torch's own default) is the A/A test: nothing may
be promoted. A move with a real gain on real compute measures how often it is certified: with
``--owner-args`` the owner's command carries them (``python train.py ARGS``), so the baseline is
what they set (``--owner-args=--micro_batch_size=2 --move micro_batch_size=4``: the same global
batch in two micro-batches of 4 sequences instead of eight of 2, fewer and larger matrix products).
``--noop-patch`` is the A/A test of a model's code: no knob moves, and a model served by a loopback
Messages server (tests/support/messages_server.py, the real ``anthropic`` client) proposes a diff that
only adds a comment, which runs as code InfraRSI did not write (held to the baseline's start-up).
Prints each campaign's verdict and interval, then promotions and the intervals' low ends.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.interference import fresh_copy
from infrarsi.contract import file_sha256, load_contract, save_contract
from infrarsi.patches.llm_proposals import TOOL_NAME
from infrarsi.records import load_doctor
from infrarsi.records.run import load_run
from infrarsi.report.model import stage_costs
from tests.support.messages_server import MessagesServer, tool_use_reply

ROOT = Path(__file__).resolve().parents[1]
INFRARSI = ROOT / ".venv" / "bin" / "infrarsi"
DATA = "data.py"


def infrarsi(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[int, float, str]:
    """Exit status, wall seconds and what it said on stderr (its progress and log lines)."""
    began = time.monotonic()
    done = subprocess.run([str(INFRARSI), *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **env} if env else None)
    return done.returncode, time.monotonic() - began, done.stderr


def keep(repo: Path, out: Path | None, name: str, said: str = "") -> None:
    """The run's and doctor's records, kept in ``out`` as ``name``-run.json and ``name``-doctor.json,
    what the command said as ``name``-stderr.txt, and the repo with its study (``bench/proposals.py``
    replays it), trial logs left out, as ``name``-repo (the copy they came from is removed)."""
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for record in ("run.json", "doctor.json"):
            source = repo / ".infrarsi" / record
            if source.exists():
                shutil.copy(source, out / f"{name}-{record}")
        (out / f"{name}-stderr.txt").write_text(said)
        shutil.copytree(repo, out / f"{name}-repo", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("trials", "doctor", "verify", "__pycache__"))


def stages(repo: Path) -> dict[str, tuple[int, float]]:
    """Launches and wall seconds of doctor, the search and verification, as the report counts them."""
    doctor, run = load_doctor(repo), load_run(repo)
    assert doctor is not None and run is not None
    return {c.stage: (c.launches, c.wall_s) for c in stage_costs(doctor, run)}


def promoted_words(repo: Path) -> tuple[str, tuple[float, float, float] | None]:
    run = load_run(repo)
    assert run is not None
    best = run.promoted or max((v for v in run.verdicts if v.job_speedup), key=lambda v: v.job_speedup[0],
                               default=None)
    if best is None:
        return f"nothing verified ({run.message})", None
    setting = ", ".join([f"{k}={v}" for k, v in best.candidate.knobs.items()] + list(best.candidate.patches))
    return f"{'promoted' if best.promoted else 'not promoted'}: {setting or 'baseline'}", best.job_speedup


def job(args: argparse.Namespace, console: Console) -> None:
    table = Table(title="The README's main job: what the answer cost")
    for column in ("run", "wall s", "doctor", "search", "verification", "proof / search", "answer", "job speed-up",
                   "hi/lo"):
        table.add_column(column)
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory() as where:
            repo = fresh_copy(Path(where))
            command = ["optimize", str(repo), "faster", "--no-bank", "--json", "--trials", str(args.trials)]
            if args.startup_wait_s:
                command += ["--", "python", "train.py", f"--load_wait_s={args.startup_wait_s:g}"]
            code, wall, said = infrarsi(*command, cwd=repo)
            keep(repo, args.out, f"job-{i + 1}", said)
            cost = stages(repo)
            answer, speedup = promoted_words(repo)
        proof_s = cost["doctor"][1] + cost["verification"][1]
        table.add_row(str(i + 1), f"{wall:.0f}", *(f"{n} / {s:.0f} s" for n, s in cost.values()),
                      f"{proof_s / cost['search'][1]:.2f}x", f"{answer} (exit {code})",
                      f"{speedup[0]:.3f}x [{speedup[1]:.3f}, {speedup[2]:.3f}]" if speedup else "–",
                      f"{speedup[2] / speedup[1]:.3f}" if speedup else "–")
        console.print(table)


def narrowed(repo: Path, knob: str | None, value: str = "") -> None:
    """The contract with one move left: ``knob`` between its default and ``value`` (none with no
    ``knob``); no library patch (the one editable file is the data's, where none finds a site)."""
    contract = load_contract(repo)
    typed: object = value
    if knob is not None:
        default = contract.knob(knob).default
        typed = type(default)(value) if default is not None else value
    knobs = [replace(k, tunable=k.name == knob, domain=[k.default, typed] if k.name == knob else k.domain)
             for k in contract.knobs]
    scope = contract.scope
    locked = {**{path: file_sha256(repo / path) for path in scope.editable}, **scope.locked}
    locked.pop(DATA, None)
    save_contract(replace(contract, knobs=knobs, scope=replace(scope, editable=[DATA], functions=[], locked=locked)),
                  repo)


def comment_diff(repo: Path) -> str:
    """A diff of the editable file that only adds a comment: the same program."""
    before = (repo / DATA).read_text()
    after = "# the corpus the job trains on\n" + before
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{DATA}", f"b/{DATA}"))


def campaigns(args: argparse.Namespace, console: Console) -> None:
    knob, value = args.move.split("=", 1) if args.move else (None, "")
    what = f"{knob}={value}" if knob else "a patch that only adds a comment"
    table = Table(title=f"Campaigns: `infrarsi run` with one move, {what}")
    for column in ("campaign", "wall s", "doctor", "search", "verification", "verdict", "job speed-up", "low"):
        table.add_column(column)
    lows: list[float] = []
    promoted = verified = 0
    for i in range(args.campaigns):
        with tempfile.TemporaryDirectory() as where, MessagesServer() as model:
            repo = fresh_copy(Path(where))
            began = time.monotonic()
            owner = ["--", "python", "train.py", *args.owner_args.split()] if args.owner_args else []
            code = infrarsi("init", str(repo), "--json", *owner)[0]
            narrowed(repo, knob, value)
            code = code or infrarsi("doctor", str(repo), "--json")[0]
            env = None
            if knob is None:
                model.script(tool_use_reply(TOOL_NAME, {"patches": [
                    {"title": "a comment", "rationale": "documents the corpus", "diff": comment_diff(repo)}]}))
                env = {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": model.url,
                       "INFRARSI_ANTHROPIC_MODEL": f"claude-noop-{i}", "INFRARSI_LLM_MAX_RETRIES": "0"}
            code = code or infrarsi("run", str(repo), "--trials", str(args.trials), "--no-bank", "--json", env=env)[0]
            wall = time.monotonic() - began
            keep(repo, args.out, f"campaign-{i + 1}")
            cost = stages(repo)
            answer, speedup = promoted_words(repo)
        promoted += answer.startswith("promoted")
        if speedup:
            verified += 1
            lows.append(speedup[1])
        table.add_row(str(i + 1), f"{wall:.0f}", *(f"{n} / {s:.0f} s" for n, s in cost.values()),
                      f"{answer} (exit {code})", f"{speedup[0]:.3f}x [{speedup[1]:.3f}, {speedup[2]:.3f}]"
                      if speedup else "–", f"{speedup[1]:.3f}" if speedup else "–")
        console.print(table)
    quartiles = statistics.quantiles(lows, n=4) if len(lows) >= 2 else lows
    console.print(json.dumps({"move": what, "campaigns": args.campaigns, "verified": verified,
                              "promoted": promoted, "low_min": min(lows, default=None),
                              "low_quartiles": [round(q, 4) for q in quartiles],
                              "low_max": max(lows, default=None)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("job")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--startup-wait-s", type=float, default=0.0)
    p = sub.add_parser("campaigns")
    move = p.add_mutually_exclusive_group(required=True)
    move.add_argument("--move", help="knob=value: the one move the contract keeps")
    move.add_argument("--noop-patch", action="store_true", help="no knob; a model proposes a comment")
    p.add_argument("--campaigns", type=int, default=20)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--owner-args", default="", help="arguments of the owner's `python train.py` (the baseline's)")
    parser.add_argument("--out", type=Path, help="keep each run's run.json and doctor.json here")
    args = parser.parse_args()
    console = Console(width=200)
    (job if args.mode == "job" else campaigns)(args, console)


if __name__ == "__main__":
    main()
