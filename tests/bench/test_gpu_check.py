"""bench/gpu_check.sh --dry: the GPU check's steps on CPU at tiny sizes, the files the device machine
would hand back, and a table whose every row comes from the run's records."""

from __future__ import annotations

import copy
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from bench.gpu_check import ARCHIVE, DRY, TABLE, build_table, gib, load_records, ms, pct

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = [plan.name for plan in DRY.fixtures]


@pytest.fixture(scope="module")
def dry(tmp_path_factory):
    """One dry run for the module: (process, $OUT, work dir, table, the check's own JSON)."""
    out, work = tmp_path_factory.mktemp("out"), tmp_path_factory.mktemp("work")
    env = {**os.environ, "OUT": str(out), "GPU_CHECK_WORK": str(work), "GPU_CHECK_PYTHON": sys.executable}
    done = subprocess.run([str(ROOT / "bench" / "gpu_check.sh"), "--dry"], env=env, capture_output=True,
                          text=True, timeout=3600)
    table = (out / TABLE).read_text() if (out / TABLE).exists() else ""
    with tarfile.open(out / ARCHIVE) as tar:
        check = json.load(tar.extractfile("gpu_check.json"))
    return done, out, work, table, check


def rows(table: str, title: str) -> list[list[str]]:
    """The body rows of the markdown table under ``## title``, as cells."""
    lines = table.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0].splitlines()
    body = [line for line in lines if line.startswith("|")][2:]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in body]


def record(out: Path, fixture: str, kind: str) -> dict:
    return json.loads((out / f"{fixture}.{kind}").read_text())


def test_the_dry_run_passes_and_returns_what_the_device_machine_would(dry):
    done, out, _, table, _ = dry
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    names = sorted(p.name for p in out.iterdir())
    expected = [TABLE, ARCHIVE] + [f"{f}.{k}" for f in FIXTURES for k in ("doctor.json", "run.json", "report.md")]
    assert names == sorted(expected)
    # The device tool returns at most 8 files, flat enough, named plainly, 16 MiB each.
    assert len(names) <= 8 and all(re.fullmatch(r"[A-Za-z0-9._-]+", n) for n in names)
    assert all(p.is_file() and p.stat().st_size < 16 * 2**20 for p in out.iterdir())
    assert table and table in done.stdout


def test_every_trial_row_is_a_trial_of_the_run_summary(dry):
    _, out, _, table, _ = dry
    shown = rows(table, "Trials")
    for fixture in FIXTURES:
        trials = record(out, fixture, "run.json")["trials"]
        mine = [r for r in shown if r[0] == fixture and r[1] != "oom"]
        assert trials and len(mine) == len(trials)
        for row, t in zip(mine, trials, strict=True):
            assert row[1:4] == [str(t["number"]), t["kind"], t["status"]]
            assert row[5:] == [ms(t["step_s"]), gib(t["peak_bytes"]), f"{t['wall_s']:.1f}"]


def test_the_summary_row_is_doctor_s_and_the_run_s(dry):
    _, out, _, table, _ = dry
    for fixture in FIXTURES:
        doctor, run = record(out, fixture, "doctor.json"), record(out, fixture, "run.json")
        row = next(r for r in rows(table, "Baseline and promoted") if r[0] == fixture)
        assert row[2] == str(doctor["efficiency"]["tokens_per_step"])
        # MFU at the baseline step time shown: doctor's MFU scaled from doctor's step time to it.
        verdict = run["promoted"] or next(iter(run["verdicts"]), None)
        base_step = statistics.median(verdict["base_step_s"]) if verdict else doctor["noise"]["step_s"]
        assert row[3] == ms(base_step)
        assert row[6].startswith(pct(doctor["efficiency"]["mfu"] * doctor["noise"]["step_s"] / base_step) + " of ")
        memory = doctor["memory"]
        assert row[8] == f"{gib(memory['peak_bytes'])} / {gib(memory['budget_bytes'])} ({memory['device']})"
        assert row[9] == run["status"]
        assert row[4] == (ms(statistics.median(verdict["cand_step_s"])) if verdict else "—")


def test_patch_rows_are_the_run_s_patch_checks(dry):
    _, out, _, table, _ = dry
    for fixture in FIXTURES:
        checks = record(out, fixture, "run.json")["patch_checks"]
        mine = [r[1:4] for r in rows(table, "Patches") if r[0] == fixture]
        assert mine == [[c["name"], c["status"], f"{c['cost_s']:.1f}"] for c in checks]


def test_the_deliberate_oom_trial_ends_oom_under_a_budget_below_the_baseline_peak(dry):
    _, out, _, table, check = dry
    for fixture in FIXTURES:
        with tarfile.open(out / ARCHIVE) as tar:
            trial = json.load(tar.extractfile(f"{fixture}.oom_trial.json"))
        assert trial["status"] == "oom", trial["detail"]
        row = next(r for r in rows(table, "Deliberate out-of-memory trial") if r[0] == fixture)
        budget = float(row[1])
        assert budget * 2**30 < record(out, fixture, "doctor.json")["memory"]["peak_bytes"]
        assert row[3] == "oom" and row[4] == trial["detail"].splitlines()[0]
        step = next(s for s in check["steps"] if s["fixture"] == fixture and s["name"] == "oom_trial")
        assert step["rc"] == 1 and f"{budget:.2f}" == f"{float(step['argv'][step['argv'].index('--budget-gib') + 1]):.2f}"


def test_the_table_moves_with_its_records(dry):
    """Rebuilt from altered records, the table shows the alterations: nothing in it is fixed text."""
    _, out, work, table, check = dry
    records = [load_records(out, work, f, 0.05) for f in FIXTURES]
    altered = copy.deepcopy(records)
    altered[0].run["trials"][0]["status"] = "timeout"
    altered[0].run["trials"][0]["wall_s"] = 1234.5
    altered[0].doctor["memory"]["peak_bytes"] = 3 * 2**30
    rebuilt = build_table(check["environment"], altered, check["steps"])
    first = next(r for r in rows(rebuilt, "Trials") if r[0] == FIXTURES[0])
    assert first[3] == "timeout" and first[7] == "1234.5"
    summary = next(r for r in rows(rebuilt, "Baseline and promoted") if r[0] == FIXTURES[0])
    assert summary[8].startswith("3.00 / ")
    assert rebuilt != build_table(check["environment"], records, check["steps"])
