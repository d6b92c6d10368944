"""Real training repos nobody here wrote, as a new user would try them: each corpus entry copied to a
temporary directory, made a git repository, then ``infrarsi init <copy> -- <its command>``,
``infrarsi doctor --repeats 2`` and one ``infrarsi trial`` (the baseline), unattended.

Each entry is a folder with a ``CORPUS.toml`` giving ``command`` (run in ``<entry>/<workdir>``,
``K=V`` prefixes allowed) and an ``[env]`` table; both reach the contract as the command's
environment. Nothing in the copy is edited: the bench checks that every file it copied is
byte-identical after the three stages.

The InfraRSI commands run with ``--python`` (the training venv, where InfraRSI is installed the way a
user installs it: ``pip install -e <this repo>``), so the trials run the scripts with that
interpreter. One table row per entry: where init found the loop and why, steps the trial observed,
the baseline step time (doctor's median), samples or tokens per second, MFU with the source of its
FLOP count, peak memory, and the status of each stage (with the reason when one fails).

    python bench/corpus.py [--corpus DIR] [--python /work/corpus-venv/bin/python] [--only NAME …]

``--roles`` runs only ``init`` (static: nothing is trained) and compares the knobs it found with each
entry's ``[truth]`` table, read from its ``CORPUS.toml`` at run time: for every truth knob that does not
change the workload, whether init made one of its flags (``env VAR`` for a variable the launcher sets)
a tunable knob; for every one that does, whether init wrongly made it tunable. Truth knobs without a
flag (a code patch would be needed) are listed but not counted.
"""

from __future__ import annotations

import argparse
import json
import os
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

from infrarsi.byte_units import GIB, MIB
from infrarsi.contract import STATE_DIR

DEFAULT_CORPUS = Path("/work/shared/corpus")
CLI = "import sys; from infrarsi.cli import main; sys.exit(main())"
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@infrarsi.local"]


@dataclass(slots=True)
class Row:
    name: str
    command: str = ""
    entry: str = ""
    loop: str = ""
    steps: str = "—"
    step_s: str = "—"
    rate: str = "—"
    mfu: str = "—"
    peak: str = "—"
    status: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def run_cli(python: str, args: list[str], cwd: Path, timeout: float) -> tuple[int, dict | None, str]:
    """(exit code, the --json document or None, stderr tail)."""
    try:
        done = subprocess.run([python, "-c", CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, None, f"timed out after {timeout:.0f} s"
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        data = None
    lines = done.stderr.strip().splitlines()
    tail = lines[-1][-300:] if lines else ""
    return done.returncode, data, tail


def _snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if path.is_file() and rel.parts[0] not in (".git", STATE_DIR):
            out[rel.as_posix()] = path.read_bytes()
    return out


def _gib(n: float | None) -> str:
    return "—" if not n else f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"


def _rate(doctor: dict, trial: dict) -> str:
    eff = doctor.get("efficiency") or {}
    for key, unit in (("tokens_per_s", "tok/s"), ("samples_per_s", "samples/s")):
        value = eff.get(key)
        if value:
            return f"{value:,.1f} {unit}"
    return "—"


def _mfu(doctor: dict) -> str:
    eff = doctor.get("efficiency") or {}
    source = eff.get("mfu_source") or "no FLOP count"
    if eff.get("mfu") is None:
        return f"— ({source})"
    check = ""
    if eff.get("flops_per_step_6n") and eff.get("flops_per_step"):
        check = f"; 6N+12LHQT {eff['flops_per_step_6n'] / eff['flops_per_step']:.2f}x of it"
    return f"{eff['mfu']:.2%} ({source}{check})"


def run_entry(entry: Path, python: str, timeout: float, keep: bool) -> Row:
    spec = tomllib.loads((entry / "CORPUS.toml").read_text())
    row = Row(entry.name)
    env = [f"{k}={v}" for k, v in (spec.get("env") or {}).items()]
    command = [*env, *shlex.split(spec["command"])]
    row.command = shlex.join(command)
    tmp = Path(tempfile.mkdtemp(prefix="corpus-bench-"))
    copy = tmp / entry.name
    try:
        shutil.copytree(entry, copy)
        subprocess.run(["git", "init", "-q", str(copy)], check=True)
        subprocess.run([*GIT, "-C", str(copy), "add", "-A"], check=True)
        subprocess.run([*GIT, "-C", str(copy), "commit", "-qm", "corpus entry as published"], check=True)
        before = _snapshot(copy)
        cwd = copy / spec.get("workdir", ".")

        t0 = time.perf_counter()
        rc, init, tail = run_cli(python, ["init", str(copy), "--json", "--", *command], cwd, timeout)
        row.seconds["init"] = time.perf_counter() - t0
        if rc != 0 or not init or init.get("status") != "ok":
            row.status.append(f"init: {(init or {}).get('message') or tail or f'exit {rc}'}")
            return row
        row.entry = f"{init['entry']} ({init.get('loop_kind', '?')})"
        row.loop = init.get("loop_why", "")
        row.status.append("init ok")

        t0 = time.perf_counter()
        rc, doctor, tail = run_cli(python, ["doctor", str(copy), "--repeats", "2", "--json"], cwd, timeout)
        row.seconds["doctor"] = time.perf_counter() - t0
        if rc != 0 or not doctor:
            row.status.append(f"doctor: {tail or f'exit {rc}'}")
        else:
            row.status.append("doctor ok")
            noise = doctor.get("noise") or {}
            if noise.get("step_s"):
                cv = noise.get("effective_cv")
                row.step_s = f"{noise['step_s']:.3f} s" + (f" (cv {cv:.0%})" if cv is not None else "")
            row.rate = _rate(doctor, {})
            row.mfu = _mfu(doctor)
            row.peak = _gib((doctor.get("memory") or {}).get("peak_bytes"))

        t0 = time.perf_counter()
        rc, trial, tail = run_cli(python, ["trial", str(copy), "--json"], cwd, timeout)
        row.seconds["trial"] = time.perf_counter() - t0
        if not trial:
            row.status.append(f"trial: {tail or f'exit {rc}'}")
        else:
            observed = len(trial.get("warmup_times") or []) + len(trial.get("step_times") or [])
            row.steps = f"{observed} ({len(trial.get('step_times') or [])} timed)"
            status = trial.get("status", "?")
            detail = (trial.get("detail") or "").strip().splitlines()
            row.status.append(f"trial {status}" + ("" if status == "ok" or not detail else f": {detail[-1][-200:]}"))
            if row.peak == "—":
                row.peak = _gib(trial.get("peak_bytes"))
        edited = sorted(rel for rel, data in before.items() if _snapshot(copy).get(rel) != data)
        if edited:
            row.status.append(f"EDITED: {', '.join(edited)}")
        return row
    finally:
        if keep:
            print(f"kept {copy}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


@dataclass(slots=True)
class TruthRow:
    repo: str
    key: str
    flags: list[str]
    changes_workload: bool
    found: list[str]
    """The truth flags init made tunable knobs, as ``flag (role)``."""
    locked: list[str]
    """The truth flags init found but left fixed, as ``flag (role)``."""


def _truth_flags(text: str) -> list[str]:
    import re

    flags = re.findall(r"--[A-Za-z][\w-]*", text)
    flags += [f"env {v}" for v in re.findall(r"\benv\s+([A-Z_][A-Z0-9_]*)", text)]
    return flags


def roles_entry(entry: Path, python: str, timeout: float) -> tuple[list[TruthRow], str]:
    """(one row per truth knob, init's status) for one corpus entry."""
    spec = tomllib.loads((entry / "CORPUS.toml").read_text())
    env = [f"{k}={v}" for k, v in (spec.get("env") or {}).items()]
    command = [*env, *shlex.split(spec["command"])]
    tmp = Path(tempfile.mkdtemp(prefix="corpus-roles-"))
    try:
        copy = tmp / entry.name
        shutil.copytree(entry, copy)
        rc, init, tail = run_cli(python, ["init", str(copy), "--json", "--", *command], copy / spec.get("workdir", "."),
                              timeout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if rc != 0 or not init or init.get("status") != "ok":
        return [], f"init: {(init or {}).get('message') or tail or f'exit {rc}'}"
    knobs = init["contract"]["knobs"]
    by_flag = {}
    for k in knobs:
        if k.get("flag_style") == "env":
            by_flag[f"env {k['flag']}"] = k
        elif k.get("flag"):
            by_flag[k["flag"].replace("-", "_")] = k
    rows = []
    for key, truth in (spec.get("truth", {}).get("knobs") or {}).items():
        flags = _truth_flags(truth.get("flag", ""))
        hits = [(f, by_flag.get(f.replace("-", "_") if f.startswith("--") else f)) for f in flags]
        rows.append(TruthRow(entry.name, key, flags, bool(truth.get("changes_workload")),
                             [f"{f} ({k['role']})" for f, k in hits if k and k.get("tunable")],
                             [f"{f} ({k['role']})" for f, k in hits if k and not k.get("tunable")]))
    return rows, "init ok"


def roles_main(entries: list[Path], python: str, timeout: float, console: Console) -> int:
    rows: list[TruthRow] = []
    for entry in entries:
        found, status = roles_entry(entry, python, timeout)
        console.print(f"{entry.name}: {status}")
        rows += found
    table = Table(title="corpus: knobs init found against each CORPUS.toml [truth] (init only, no LLM)")
    for column in ("repo", "truth knob", "truth flags", "workload?", "tunable in the contract", "found, fixed",
                   "verdict"):
        table.add_column(column)
    tunable_total = tunable_found = wrong = 0
    for r in rows:
        if not r.flags:
            verdict = "no flag (needs a code patch): not counted"
        elif r.changes_workload:
            verdict = "DEFECT: workload knob tunable" if r.found else "ok (locked)"
            wrong += bool(r.found)
        else:
            tunable_total += 1
            tunable_found += bool(r.found)
            verdict = "found" if r.found else "MISSED"
        table.add_row(r.repo, r.key, " ".join(r.flags) or "—", "yes" if r.changes_workload else "no",
                      ", ".join(r.found) or "—", ", ".join(r.locked) or "—", verdict)
    console.print(table)
    recall = tunable_found / tunable_total if tunable_total else 0.0
    console.print(f"recall of tunable truth knobs: {tunable_found}/{tunable_total} = {recall:.0%} (goal >= 90%); "
                  f"workload knobs marked tunable: {wrong} (goal 0)")
    return 0 if wrong == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--python", default=sys.executable,
                        help="the training venv's interpreter, with InfraRSI installed (default: this one)")
    parser.add_argument("--only", nargs="*", metavar="NAME", help="these entries only")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per stage (default 1800)")
    parser.add_argument("--keep", action="store_true", help="keep the copies (their .infrarsi/ holds the logs)")
    parser.add_argument("--roles", action="store_true",
                        help="init only: compare the knobs found with each entry's [truth] table")
    args = parser.parse_args()
    entries = sorted(p.parent for p in args.corpus.glob("*/CORPUS.toml"))
    if args.only:
        entries = [e for e in entries if e.name in args.only]
    console = Console(width=200)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    console.print(f"python {args.python}; load average {' '.join(load)} at start")
    if args.roles:
        return roles_main(entries, args.python, args.timeout, console)
    rows = []
    for entry in entries:
        console.print(f"[bold]{entry.name}[/] …")
        row = run_entry(entry, args.python, args.timeout, args.keep)
        console.print(f"  {row.command}\n  loop: {row.loop or '—'}\n  {'; '.join(row.status)}  "
                      f"({', '.join(f'{k} {v:.0f} s' for k, v in row.seconds.items())})")
        rows.append(row)
    table = Table(title="corpus: init -- <command>, doctor --repeats 2, one trial")
    for column in ("repo", "entry (loop)", "steps observed", "step time", "samples or tokens/s",
                   "MFU (FLOP source)", "peak memory", "status"):
        table.add_column(column)
    for r in rows:
        table.add_row(r.name, r.entry or "—", r.steps, r.step_s, r.rate, r.mfu, r.peak, "; ".join(r.status))
    console.print(table)
    with open("/proc/loadavg") as f:
        console.print(f"load average {' '.join(f.read().split()[:3])} at the end")
    return 0 if all(any(s.startswith("trial ok") for s in r.status) for r in rows) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
