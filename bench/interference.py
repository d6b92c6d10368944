"""The README's main job (`optimize` on the dense fixture) on a quiet and on a busy machine (issue 20).

    .venv/bin/python -m bench.interference [--trials 4] [--repeats 2] [--rounds 1] [--wait 60] [--small]
                                           [--ways quiet,halfway,throughout] [--max-minutes M]

Three ways, interleaved in one session (round after round): ``quiet`` (no hog of ours), ``halfway``
(a one-core busy loop pinned to one of the job's cores, started when the search's middle trial
begins and left running), ``throughout`` (the same hog started before `optimize`). Each is a fresh
copy of fixtures/dense_gpt in a new git repo, run as the README runs it (`infrarsi optimize PATH
"faster"`, here with `--trials`, `--repeats`, `--no-bank` and `--wait-for-quiet`; with ``--small``, the owner's command after `--` is the fixture's
train.py at the tests' small sizes, ``SMALL``, so a trial takes seconds). Prints, for each:
the wall time, the time it reported waiting for quiet, the promoted candidate with its interval,
the disturbed trials and reruns, and `/proc/loadavg` before and after; then whether the goal held:
the same promotion decision as the quiet run (the same candidate, or one inside the quiet run's
interval) and a cost of at most 1.5x the quiet run's wall time plus the reported waiting.
Other people's processes are not ours to stop: the load columns say what else ran. With
``--max-minutes`` an optimize still running after that long gets Ctrl-C (it keeps its trials and
reports itself interrupted), so a way that would run for hours says so in bounded time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from infrarsi.contract import STATE_DIR
from infrarsi.records.files import doctor_path, state_dir, trials_dir

ROOT = Path(__file__).resolve().parents[1]
INFRARSI = ROOT / ".venv" / "bin" / "infrarsi"
WAYS = ("quiet", "halfway", "throughout")
SMALL = ["python", "train.py", "--n_layer=2", "--n_head=4", "--n_embd=64", "--vocab_size=256", "--block_size=64",
         "--batch_size=8"]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def fresh_copy(where: Path) -> Path:
    repo = where / "dense_gpt"
    shutil.copytree(ROOT / "fixtures" / "dense_gpt", repo, ignore=shutil.ignore_patterns("__pycache__", STATE_DIR))
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=demo", "-c", "user.email=demo@localhost",
                                                 "commit", "-qm", "baseline"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    return repo


class Hog:
    """One busy-loop process pinned to one core the job may use."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.started_at: float | None = None

    def start(self) -> None:
        if self.proc is None:
            self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            os.sched_setaffinity(self.proc.pid, {min(os.sched_getaffinity(0))})
            self.started_at = time.monotonic()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def search_trials_begun(repo: Path) -> int:
    """Trials the run has begun (each gets .infrarsi/trials/<id>/ as it starts)."""
    trials = trials_dir(repo)
    return len(list(trials.iterdir())) if trials.is_dir() else 0


def one(way: str, args, where: Path) -> dict:
    repo = fresh_copy(where)
    hog = Hog()
    # The baseline and the patch's validation run first; the hog joins when the middle search trial begins.
    halfway = 2 + args.trials // 2
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.5):
            if search_trials_begun(repo) >= halfway:
                hog.start()
                return

    command = [str(INFRARSI), "optimize", str(repo), "faster", "--trials", str(args.trials), "--repeats",
               str(args.repeats), "--no-bank", "--json", "--wait-for-quiet", str(args.wait),
               *(["--", *SMALL] if args.small else [])]
    before = loadavg()
    started = time.monotonic()
    if way == "throughout":
        hog.start()
    watcher = threading.Thread(target=watch, daemon=True)
    if way == "halfway":
        watcher.start()
    try:
        out = run_bounded(command, args.max_minutes, env={**os.environ, "INFRARSI_BANK_URL": f"sqlite:///{where / 'bank.db'}"})
    finally:
        done.set()
        hog_s = time.monotonic() - hog.started_at if hog.started_at else 0.0
        hog.stop()
    wall = time.monotonic() - started
    from infrarsi.contract import load_contract

    row = {"way": way, "wall_s": wall, "defaults": load_contract(repo).defaults() if state_dir(repo).exists() else {}, "load_before": before, "load_after": loadavg(), "hog_s": hog_s,
           "command": " ".join(command), "rc": out.returncode}
    try:
        data = json.loads(out.stdout)
    except json.JSONDecodeError:
        row["error"] = (out.stderr or out.stdout)[-400:]
        return row
    run = data.get("run") or {}
    doctor = json.loads(doctor_path(repo).read_text())
    background = doctor.get("background") or {}
    disturbance = run.get("disturbance") or {}
    promoted = run.get("promoted")
    row.update({
        "status": data["status"],
        "promoted": promoted["candidate"] if promoted else None,
        "interval": promoted["job_speedup"] if promoted else None,
        "verdicts": [(v["candidate"], v["job_speedup"], v["promoted"]) for v in run.get("verdicts", [])],
        "waited_s": float(disturbance.get("waited_s", 0.0)) + float(background.get("waited_s", 0.0)),
        "doctor_busy": background.get("busy"), "doctor_idle_cores": background.get("idle_cores"),
        "limit_cores": background.get("limit_cores"), "limit_denied": background.get("limit_denied"),
        "trials": len(run.get("trials", [])), "disturbed": disturbance.get("trials", 0),
        "disturbed_s": disturbance.get("seconds", 0.0), "reruns": len(disturbance.get("reruns", [])),
        "unresolved": len(disturbance.get("unresolved", [])),
        "message": (run.get("message") or data.get("message") or "")[:300],
    })
    return row


def run_bounded(command: list[str], max_minutes: float | None, env: dict) -> subprocess.CompletedProcess:
    """``command`` to its end, or Ctrl-C'd (SIGINT, as a person would) after ``max_minutes``."""
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            out, err = proc.communicate(timeout=max_minutes * 60 if max_minutes else None)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate()
        return subprocess.CompletedProcess(command, proc.returncode, out, err)


def same_decision(row: dict, quiet: dict) -> bool:
    if row.get("promoted") == quiet.get("promoted"):
        return True
    if row.get("promoted") is None or quiet.get("interval") is None or row.get("interval") is None:
        return False
    low, high = quiet["interval"][1], quiet["interval"][2]
    return low <= row["interval"][0] <= high


def describe(candidate: dict | None, base: dict) -> str:
    if candidate is None:
        return "none"
    knobs = {k: v for k, v in candidate["knobs"].items() if base.get(k) != v}
    return ", ".join([*(f"{k}={v}" for k, v in sorted(knobs.items())), *candidate["patches"]]) or "baseline"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=4, help="search trials per optimize (README: the goal's 20)")
    parser.add_argument("--repeats", type=int, default=2, help="doctor's baseline runs (README: 3)")
    parser.add_argument("--rounds", type=int, default=1, help="times to run the three ways, interleaved")
    parser.add_argument("--wait", type=float, default=60.0, help="--wait-for-quiet SECONDS for every optimize")
    parser.add_argument("--small", action="store_true", help="the fixture at the tests' small sizes (SMALL)")
    parser.add_argument("--out", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--ways", default=",".join(WAYS), help=f"which ways, in order (of {', '.join(WAYS)})")
    parser.add_argument("--max-minutes", type=float, help="Ctrl-C an optimize still running after this long")
    args = parser.parse_args()
    ways = args.ways.split(",")
    if unknown := [w for w in ways if w not in WAYS]:
        parser.error(f"unknown way {unknown[0]!r}; choose from {', '.join(WAYS)}")
    rows = []
    for r in range(args.rounds):
        for way in ways:
            with tempfile.TemporaryDirectory(prefix=f"infrarsi-bench-{way}-") as tmp:
                row = one(way, args, Path(tmp))
            row["round"] = r
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.out:
                args.out.write_text(json.dumps(rows, indent=2))
    print()
    print("| round | way | wall s | waited s | hog s | trials | disturbed (s) | reruns | still disturbed | status | promoted "
          "| 95% CI | doctor idle cores (busy) | load before -> after | same decision | cost <= 1.5x quiet + wait |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in range(args.rounds):
        quiet = next((x for x in rows if x["round"] == r and x["way"] == "quiet"), None)
        for row in [x for x in rows if x["round"] == r]:
            if "error" in row:
                print(f"| {r} | {row['way']} | {row['wall_s']:.0f} | - | - | - | - | - | - | - | error: "
                      f"{row['error'][-120:]!r} | | | {row['load_before']} -> {row['load_after']} | | |")
                continue
            ci = f"{row['interval'][1]:.2f}-{row['interval'][2]:.2f}" if row["interval"] else "-"
            same = cost = "-"
            if quiet is not None and row["way"] != "quiet" and "error" not in quiet:
                same = "yes" if same_decision(row, quiet) else "no"
                cost = "yes" if row["wall_s"] <= 1.5 * quiet["wall_s"] + row["waited_s"] else "no"
            print(f"| {r} | {row['way']} | {row['wall_s']:.0f} | {row['waited_s']:.0f} | {row['hog_s']:.0f} | "
                  f"{row['trials']} | {row['disturbed']} ({row['disturbed_s']:.0f}) | {row['reruns']} | {row['unresolved']} | "
                  f"{row['status']} | "
                  f"{describe(row['promoted'], row['defaults'])} | {ci} | {row['doctor_idle_cores']} ({row['doctor_busy']}) | "
                  f"{row['load_before']} -> {row['load_after']} | {same} | {cost} |")
    print()
    print("command:", rows[0]["command"] if rows else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
