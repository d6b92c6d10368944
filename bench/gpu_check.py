"""The GPU check: the whole tool once on a GPU, at sizes that keep it busy.

For each fixture (dense_gpt, then moe_gpt): a git copy whose size knobs are set to the mode's
sizes (the fixtures' own flags, written as the copy's defaults), then the CLI as a user runs it:
``infrarsi init`` (budget, warm-up and measured steps; a dry run then writes a lighter ``[verify]``
table, as an owner would), ``infrarsi doctor --repeats 2``, one
``infrarsi trial --budget-gib X`` with X half the baseline's measured peak (it must end ``oom``:
a real CUDA out-of-memory error on a GPU, the RSS watchdog's kill on a CPU), and a short
``infrarsi optimize`` (trial budget per mode). The records land in ``--out``:

    gpu_check.md               the one-page table, built from the records below
    <fixture>.doctor.json      doctor's record
    <fixture>.run.json         the run summary
    <fixture>.report.md        the report
    gpu_check.tar.gz           everything else: each command's output, the deliberate OOM trial's
                               JSON, every trial's log and command, report.html, the machine

Eight files at most, flat: what the device machine hands back. The table is written again after
every step, so a run cut short still returns what it measured. Each step gets what is left of
``--deadline-s``; a step still running at the deadline is interrupted (SIGINT, then SIGKILL), and
steps that no longer fit are listed as not run.

    bench/gpu_check.sh [--dry]                       # the wrapper: installs on a GPU machine first
    python -m bench.gpu_check --out DIR [--dry]      # this file, with the project importable
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from infrarsi.byte_units import GIB
from infrarsi.contract import STATE_DIR, Contract, ContractError, VerifyPolicy, load_contract, save_contract
from infrarsi.knobs.rewrite import set_defaults
from infrarsi.records import DoctorReport, HardwareFingerprint
from infrarsi.records.files import state_dir
from infrarsi.report.model import candidate_peak
from infrarsi.runner.sandbox import bwrap_problem
from infrarsi.trials import Candidate

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
TABLE = "gpu_check.md"
ARCHIVE = "gpu_check.tar.gz"
LOG_BYTES = 256 * 1024
"""Each log's tail kept in the archive."""
CLI = "import sys; from infrarsi.cli import main; sys.exit(main())"
"""The ``infrarsi`` command, for an interpreter where the project is importable but not installed."""


@dataclass(frozen=True)
class FixturePlan:
    name: str
    sizes: dict[str, int]
    """Knob defaults written into the copy (each a flag the fixture already has)."""
    budget_gib: float | None
    """``init --budget-gib``; None keeps the README's budget."""
    trials: int
    """``optimize --trials``: the baseline and each patch's validation count as trials; on a GPU the
    baseline, every applicable patch (SDPA and TF32; batched dispatch on the MoE) and one search
    trial. Re-verification comes on top: 3 to 6 rounds of the top two and the baseline."""


@dataclass(frozen=True)
class Mode:
    name: str
    fixtures: tuple[FixturePlan, ...]
    warmup_steps: int
    measured_steps: int
    doctor_repeats: int
    deadline_s: float | None
    planned_steps: int | None = None
    """``init --planned-steps``: the owner's job length, which bounds verification's long runs;
    None keeps the fixture's own."""
    verify: VerifyPolicy | None = None
    """The ``[verify]`` table written into the contract after init; None keeps the defaults."""


GPU = Mode(
    name="gpu",
    fixtures=(
        # GPT-2 small: 124 M parameters, T 1024; micro-batch 4 of 16 leaves the search room to grow it.
        FixturePlan("dense_gpt", {"n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50304,
                                  "block_size": 1024, "batch_size": 16, "micro_batch_size": 4}, 32.0, 4),
        # 8 layers of 8 experts, top-2: ~350 M parameters, ~120 M active per token, T 1024.
        FixturePlan("moe_gpt", {"n_layer": 8, "n_head": 12, "n_embd": 768, "vocab_size": 32768,
                                "block_size": 1024, "batch_size": 16, "micro_batch_size": 4,
                                "n_expert": 8, "top_k": 2}, 32.0, 5),
    ),
    warmup_steps=2,
    measured_steps=4,
    doctor_repeats=2,
    deadline_s=480.0,
    # The H200 run of 2026-12-04 (docs/benchmarks.md): at the fixtures' 200 steps doctor's long runs
    # took 133-174 s of each fixture's share and left the search none; 30 steps and two rounds of
    # one candidate fit a baseline, the patches' validations and re-verification in 240 s.
    planned_steps=30,
    verify=VerifyPolicy(candidates=1, least_rounds=2, most_rounds=2),
)
DRY = Mode(
    name="dry",
    fixtures=(
        FixturePlan("dense_gpt", {"n_layer": 2, "n_head": 2, "n_embd": 32, "vocab_size": 256,
                                  "block_size": 64, "batch_size": 8, "micro_batch_size": 2}, None, 2),
        FixturePlan("moe_gpt", {"n_layer": 2, "n_head": 2, "n_embd": 32, "vocab_size": 256,
                                "block_size": 64, "batch_size": 8, "micro_batch_size": 2,
                                "n_expert": 4, "top_k": 2}, None, 1),
    ),
    warmup_steps=1,
    measured_steps=3,
    doctor_repeats=2,
    deadline_s=None,
    # The plumbing, not the speed, is what a dry run checks: verification's long runs at 30 steps,
    # not the fixture's 200, and two rounds of one candidate.
    planned_steps=30,
    verify=VerifyPolicy(candidates=1, least_rounds=2, most_rounds=2),
)
MODES = {m.name: m for m in (GPU, DRY)}


@dataclass
class Step:
    """One CLI command of the check."""

    fixture: str
    name: str
    """init | doctor | oom_trial | optimize | report."""
    argv: list[str]
    """As a user types it (``infrarsi …``)."""
    rc: int | None = None
    """None: not run (out of time, or an earlier step failed)."""
    seconds: float = 0.0
    note: str = ""
    log: str = ""


@dataclass
class Check:
    mode: str
    out: Path
    work: Path
    started: float = field(default_factory=time.monotonic)
    deadline_s: float | None = None
    steps: list[Step] = field(default_factory=list)
    environment: dict = field(default_factory=dict)
    share_ends_s: float | None = None
    """Seconds from the start by which the current fixture's steps must end."""

    def left_s(self, reserve_s: float = 0.0) -> float | None:
        if self.share_ends_s is None:
            return None
        return self.share_ends_s - reserve_s - (time.monotonic() - self.started)


# --- running the CLI ----------------------------------------------------------------------------


def run_cli(check: Check, step: Step, *, min_s: float = 20.0, reserve_s: float = 0.0) -> str:
    """Run ``step`` (its argv after ``infrarsi``); stdout is returned, both streams are logged.
    A step given less than ``min_s`` is not started; one still running ``reserve_s`` before its
    fixture's share of the deadline ends gets SIGINT (the stages save what they measured) and, 30 s
    later, SIGKILL."""
    check.steps.append(step)
    left = check.left_s(reserve_s)
    if left is not None and left < min_s:
        step.note = (f"not run: {max(left, 0):.0f} s left of this fixture's share of the "
                     f"{check.deadline_s:.0f} s deadline")
        return ""
    log_dir = check.work / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    stdout_path = log_dir / f"{step.fixture}.{step.name}.json"
    stderr_path = log_dir / f"{step.fixture}.{step.name}.log"
    began = time.monotonic()
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", CLI, *step.argv[1:]], stdout=out, stderr=err,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            step.note = "interrupted at the deadline"
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    step.rc = proc.returncode
    step.seconds = time.monotonic() - began
    step.log = str(stderr_path)
    return stdout_path.read_text(errors="replace")


def json_or_none(text: str) -> dict | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


# --- the fixture's copy -------------------------------------------------------------------------


def sized_copy(plan: FixturePlan, dest: Path) -> Path:
    """``fixtures/<name>`` as a git repo of one commit (a plain copy where git is missing), its size
    knobs' defaults set to the plan's."""
    repo = dest / plan.name
    if repo.exists():
        shutil.rmtree(repo)
    shutil.copytree(FIXTURES / plan.name, repo, ignore=shutil.ignore_patterns("__pycache__", STATE_DIR))
    script = repo / "train.py"
    script.write_text(set_defaults(script.read_text(), plan.sizes))
    if shutil.which("git") is None:  # only init's base commit and apply need one; the check runs no apply
        return repo
    git = ["git", "-C", str(repo), "-c", "user.name=gpu-check", "-c", "user.email=gpu-check@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "baseline at the check's sizes"]):
        subprocess.run([*git, *args], check=True)
    return repo


def state(repo: Path, name: str) -> Path:
    return state_dir(repo) / name


def sandbox_args() -> list[str]:
    """``--no-sandbox`` where bubblewrap cannot run (the device machine has none): the check is
    about the GPU paths, and the table's notes say the trials ran unsandboxed."""
    return ["--no-sandbox"] if bwrap_problem() else []


def check_fixture(check: Check, mode: Mode, plan: FixturePlan) -> None:
    repo = sized_copy(plan, check.work)
    unsandboxed = sandbox_args()
    init_argv = ["infrarsi", "init", str(repo), "--warmup-steps", str(mode.warmup_steps),
                 "--measured-steps", str(mode.measured_steps), "--json"]
    if plan.budget_gib is not None:
        init_argv[3:3] = ["--budget-gib", f"{plan.budget_gib:g}"]
    if mode.planned_steps is not None:
        init_argv[3:3] = ["--planned-steps", str(mode.planned_steps)]
    run_cli(check, Step(plan.name, "init", init_argv))
    if check.steps[-1].rc != 0:
        return _skip_rest(check, plan.name, "init failed")
    if mode.verify is not None:
        save_contract(replace(load_contract(repo), verify=mode.verify), repo)
    run_cli(check, Step(plan.name, "doctor", ["infrarsi", "doctor", str(repo), "--repeats",
                                                str(mode.doctor_repeats), "--json", *unsandboxed]), min_s=30.0)
    doctor = json_or_none(state(repo, "doctor.json").read_text()) if state(repo, "doctor.json").exists() else None
    if check.steps[-1].rc != 0 or doctor is None:
        return _skip_rest(check, plan.name, "doctor left no record")
    # Half the baseline's measured peak: below what the baseline needs, whatever the machine.
    budget_gib = doctor["memory"]["peak_bytes"] / 2 / GIB
    oom = run_cli(check, Step(plan.name, "oom_trial", ["infrarsi", "trial", str(repo), "--budget-gib",
                                                         f"{budget_gib:.4f}", "--json", *unsandboxed]))
    (check.work / f"{plan.name}.oom_trial.json").write_text(oom)
    # Room kept for the report, which an interrupted optimize does not write.
    run_cli(check, Step(plan.name, "optimize", ["infrarsi", "optimize", str(repo), "faster", "--trials",
                                                  str(plan.trials), "--json", *unsandboxed]),
            min_s=60.0, reserve_s=15.0)
    if state(repo, "run.json").exists() and not state(repo, "report.md").exists():
        run_cli(check, Step(plan.name, "report", ["infrarsi", "report", str(repo), "--format", "md"]),
                min_s=5.0)


def _skip_rest(check: Check, fixture: str, why: str) -> None:
    check.steps.append(Step(fixture, "rest", [], note=f"not run: {why}"))


# --- the table ----------------------------------------------------------------------------------


@dataclass
class FixtureRecords:
    """What the table is built from: the files in ``--out`` (and the OOM trial's JSON)."""

    name: str
    contract: Contract | None
    doctor: dict | None
    run: dict | None
    oom: dict | None
    oom_budget_gib: float | None


def load_records(out: Path, work: Path, fixture: str, oom_budget_gib: float | None) -> FixtureRecords:
    def read(path: Path) -> dict | None:
        return json_or_none(path.read_text()) if path.exists() else None

    try:
        contract = load_contract(work / fixture)
    except ContractError:
        contract = None
    return FixtureRecords(fixture, contract, read(out / f"{fixture}.doctor.json"), read(out / f"{fixture}.run.json"),
                          read(work / f"{fixture}.oom_trial.json"), oom_budget_gib)


def ms(seconds: float | None) -> str:
    return f"{seconds * 1000:.1f}" if seconds is not None else "—"


def gib(value: float | None) -> str:
    return f"{value / GIB:.2f}" if value else "—"


def pct(value: float | None) -> str:
    return f"{value * 100:.3g}%" if value is not None else "—"


def median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def changes(candidate: dict, contract: Contract | None) -> str:
    """A candidate as its differences from the contract's defaults."""
    defaults = contract.defaults() if contract is not None else {}
    knobs = [f"{k}={v}" for k, v in sorted(candidate.get("knobs", {}).items()) if defaults.get(k) != v]
    patches = [f"+{p}" for p in candidate.get("patches", [])]
    return " ".join(knobs + patches) or "baseline"


def side_mfu(records: FixtureRecords, step_s: float | None, candidate: dict) -> tuple[float | None, str]:
    """MFU at ``step_s`` of a candidate (the baseline: no changes), against the peak the report
    holds it to (its own precision's datasheet peak on a GPU), and that peak's precision."""
    doctor = DoctorReport.from_dict(records.doctor)
    eff = doctor.efficiency
    if not step_s or not eff.flops_per_step or eff.peak is None or records.contract is None:
        return None, ""
    peak = candidate_peak(Candidate.from_dict(candidate), records.contract, doctor)
    # The FLOPs doctor's MFU uses (FlopCounterMode's count, else 6N+12LHQT): the same workload per step.
    return eff.flops_per_step / step_s / (peak.value * eff.devices), peak.dtype


def build_table(check_info: dict, records: list[FixtureRecords], steps: list[dict]) -> str:
    lines = [f"# GPU check ({check_info['mode']} mode)", ""]
    machine = next((r.doctor["hardware"] for r in records if r.doctor), None)
    if machine:
        lines.append(f"Machine: {HardwareFingerprint.from_dict(machine).describe()} (id {machine['id']}).  ")
    lines.append(f"Date {check_info['date']}, commit {check_info['commit']}, python {check_info['python']}, "
                 f"torch {check_info['torch']}; check wall time {check_info['wall_s']:.0f} s.  ")
    for note in check_info.get("notes", []):
        lines.append(f"Note: {note}  ")
    lines += ["", "## Baseline and promoted", "",
              "| fixture | params (active) | tokens/step | baseline step ms | promoted step ms | speedup (95% CI) "
              "| MFU baseline | MFU promoted | peak / budget GiB | run |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        if r.doctor is None:
            lines.append(f"| {r.name} | — | — | — | — | — | — | — | — | no doctor record |")
            continue
        eff, memory = r.doctor["efficiency"], r.doctor["memory"]
        facts = _model_facts(r)
        params = f"{facts.get('params', 0) / 1e6:.3g} M ({facts.get('active_params', 0) / 1e6:.3g} M)" if facts else "—"
        run = r.run or {}
        verdict = run.get("promoted") or next(iter(run.get("verdicts") or []), None)
        base_step = median(verdict["base_step_s"]) if verdict else r.doctor["noise"]["step_s"]
        cand_step = median(verdict["cand_step_s"]) if verdict else None
        base_mfu = pct(side_mfu(r, base_step, {})[0])
        if eff.get("peak"):
            base_mfu += f" of {eff['peak']['value'] / 1e12:.1f} TFLOP/s {eff['peak']['dtype']} ({eff['peak']['method']})"
        speedup = "—"
        cand_mfu = "—"
        if verdict:
            point, low, high = verdict["job_speedup"] or (None, None, None)
            speedup = (f"{point:.2f}× ({low:.2f}–{high:.2f})" if point else "—")
            speedup += "" if verdict["promoted"] else " not promoted"
            value, dtype = side_mfu(r, cand_step, verdict["candidate"])
            cand_mfu = f"{pct(value)} of {dtype}" if value is not None else "—"
        status = run.get("status", "no run record")
        lines.append(f"| {r.name} | {params} | {eff['tokens_per_step']} | {ms(base_step)} | {ms(cand_step)} | "
                     f"{speedup} | {base_mfu} | {cand_mfu} | {gib(memory['peak_bytes'])} / "
                     f"{gib(memory['budget_bytes'])} ({memory['device']}) | {status} |")
    lines += ["", "Baseline step: median of the baseline's re-verification reruns (doctor's when none ran); promoted: "
              "the promoted candidate's (or the best verified one's, marked not promoted). MFU at those step times; "
              "the promoted side's against the peak of its own matmul precision.", ""]
    lines += ["## Promoted and verified candidates", "", "| fixture | candidate | promoted | reason |", "|---|---|---|---|"]
    for r in records:
        for v in (r.run or {}).get("verdicts", []):
            lines.append(f"| {r.name} | {changes(v['candidate'], r.contract)} | {'yes' if v['promoted'] else 'no'} | "
                         f"{_cell(v['reason'])} |")
    lines += ["", "## Patches", "", "| fixture | patch | status | cost s | reason |", "|---|---|---|---|---|"]
    for r in records:
        for p in (r.run or {}).get("patch_checks", []):
            lines.append(f"| {r.name} | {p['name']} | {p['status']} | {p['cost_s']:.1f} | {_cell(p['reason'])} |")
    lines += ["", "## Trials", "", "| fixture | # | kind | status | candidate | step ms | peak GiB | cost s |",
              "|---|---|---|---|---|---|---|---|"]
    for r in records:
        for t in (r.run or {}).get("trials", []):
            lines.append(f"| {r.name} | {t['number']} | {t['kind']} | {t['status']} | "
                         f"{changes(t['candidate'], r.contract)} | {ms(t['step_s'])} | {gib(t['peak_bytes'])} | "
                         f"{t['wall_s']:.1f} |")
        if r.oom is not None:
            o = r.oom
            lines.append(f"| {r.name} | oom | budget {r.oom_budget_gib:.2f} GiB | {o['status']} | "
                         f"{changes(o['candidate'], r.contract)} | {ms(median(o['step_times']))} | "
                         f"{gib(o['peak_bytes'])} | {o['wall_s']:.1f} |")
    lines += ["", "## Deliberate out-of-memory trial", "",
              "| fixture | budget GiB | baseline peak GiB | status | detail |", "|---|---|---|---|---|"]
    for r in records:
        if r.oom is not None:
            lines.append(f"| {r.name} | {r.oom_budget_gib:.2f} | {gib(r.doctor['memory']['peak_bytes'])} | "
                         f"{r.oom['status']} | {_cell(oom_words(r.oom['detail']))} |")
    lines += ["", "## Commands", "", "| fixture | command | exit | seconds | note |", "|---|---|---|---|---|"]
    for s in steps:
        command = " ".join(s["argv"]).replace(str(check_info["work"]) + "/", "")
        shown = f"`{command}`" if command else "the remaining steps"
        lines.append(f"| {s['fixture']} | {shown} | {s['rc'] if s['rc'] is not None else '—'} | "
                     f"{s['seconds']:.1f} | {_cell(s['note'])} |")
    return "\n".join(lines) + "\n"


def oom_words(detail: str) -> str:
    """An OOM's detail in one line: its first (the level seen, or the error's own line)."""
    return next((line for line in detail.splitlines() if line.strip()), "")


def _model_facts(r: FixtureRecords) -> dict:
    baseline = (r.run or {}).get("baseline") or {}
    return baseline.get("model_facts") or {}


def _cell(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- the environment and the outputs ------------------------------------------------------------


def environment(mode: str, work: Path) -> dict:
    info = {
        "mode": mode,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": os.environ.get("GPU_CHECK_COMMIT") or _git_head() or "unknown",
        "python": sys.version.split()[0],
        "torch": f"{torch.__version__} (CUDA {torch.version.cuda or 'none'}, "
                 f"{'GPU ' + torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU'})",
        "work": str(work),
        "notes": [n for n in os.environ.get("GPU_CHECK_NOTES", "").split("\n") if n.strip()],
    }
    if bwrap_problem():
        info["notes"].append(f"trials ran with --no-sandbox: {bwrap_problem()}")
    if mode == "gpu" and not torch.cuda.is_available():
        info["notes"].append("gpu mode on a machine where torch sees no CUDA device: the numbers are CPU numbers")
    return info


def _git_head() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def write_outputs(check: Check, mode: Mode) -> str:
    """Copy the records to ``--out``, rebuild the table and the archive; returns the table."""
    out, work = check.out, check.work
    records = []
    for plan in mode.fixtures:
        repo = work / plan.name
        for name, dest in (("doctor.json", f"{plan.name}.doctor.json"), ("run.json", f"{plan.name}.run.json"),
                           ("report.md", f"{plan.name}.report.md")):
            if state(repo, name).exists():
                shutil.copyfile(state(repo, name), out / dest)
        oom_step = next((s for s in check.steps if s.fixture == plan.name and s.name == "oom_trial" and s.argv), None)
        budget = float(oom_step.argv[oom_step.argv.index("--budget-gib") + 1]) if oom_step else None
        records.append(load_records(out, work, plan.name, budget))
    info = {**check.environment, "wall_s": time.monotonic() - check.started}
    steps = [asdict(s) for s in check.steps]
    table = build_table(info, records, steps)
    (out / TABLE).write_text(table)
    (work / "gpu_check.json").write_text(json.dumps({"environment": info, "steps": steps}, indent=2))
    _archive(check, mode)
    return table


def _archive(check: Check, mode: Mode) -> None:
    work = check.work
    with tarfile.open(check.out / ARCHIVE, "w:gz") as tar:
        for path in sorted(work.glob("*.json")) + sorted((work / "logs").glob("*")):
            _add_tail(tar, path, path.relative_to(work).as_posix())
        for name in ("machine.txt", "install.log"):
            if (work / name).exists():
                _add_tail(tar, work / name, name)
        for plan in mode.fixtures:
            repo = work / plan.name
            for extra in ("report.html", "contract.toml"):
                if state(repo, extra).exists():
                    tar.add(state(repo, extra), arcname=f"{plan.name}/{extra}")
            for log_dir in sorted(p.parent for p in state_dir(repo).glob("**/output.log")):
                rel = log_dir.relative_to(state_dir(repo)).as_posix()
                for name in ("output.log", "command.txt"):
                    if (log_dir / name).exists():
                        _add_tail(tar, log_dir / name, f"{plan.name}/{rel}/{name}")


def _add_tail(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    data = path.read_bytes()[-LOG_BYTES:]
    info = tarfile.TarInfo(arcname)
    info.size = len(data)
    info.mtime = int(path.stat().st_mtime)
    tar.addfile(info, io.BytesIO(data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or ROOT / ".gpu_check" / "out"),
                        help="where the records and the table go (default: $OUT)")
    parser.add_argument("--work", type=Path, help="where the fixtures' copies live (default: a fresh temp dir)")
    parser.add_argument("--dry", action="store_true", help="tiny sizes on CPU, a short budget")
    parser.add_argument("--deadline-s", type=float, help="the whole check's time (default: the mode's)")
    parser.add_argument("--fixtures", help="comma-separated subset of dense_gpt,moe_gpt")
    args = parser.parse_args(argv)
    mode = DRY if args.dry else GPU
    if args.fixtures:
        wanted = args.fixtures.split(",")
        unknown = [f for f in wanted if f not in {p.name for p in mode.fixtures}]
        if unknown:
            parser.error(f"unknown fixture {unknown[0]!r}; choose from {', '.join(p.name for p in mode.fixtures)}")
        mode = replace(mode, fixtures=tuple(p for p in mode.fixtures if p.name in wanted))
    if mode.name == "dry":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the dry run is a CPU run wherever it runs
    work = args.work or Path(os.environ.get("TMPDIR", "/tmp")) / f"gpu_check-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    check = Check(mode=mode.name, out=args.out, work=work,
                  deadline_s=args.deadline_s if args.deadline_s is not None else mode.deadline_s)
    check.environment = environment(mode.name, work)
    for i, plan in enumerate(mode.fixtures, start=1):
        # Each fixture may use the deadline's time up to its equal share; what one leaves, the next gets.
        if check.deadline_s is not None:
            check.share_ends_s = check.deadline_s * i / len(mode.fixtures)
        check_fixture(check, mode, plan)
        write_outputs(check, mode)
    table = write_outputs(check, mode)
    print(table)
    return 0 if passed(check) else 1


def passed(check: Check) -> bool:
    """Every step ran and exited 0, except the deliberate OOM trial, which must have ended oom."""
    for step in check.steps:
        if step.name == "oom_trial":
            path = check.work / f"{step.fixture}.oom_trial.json"
            result = json_or_none(path.read_text()) if step.rc is not None and path.exists() else None
            if result is None or result.get("status") != "oom":
                return False
        elif step.rc != 0:
            return False
    return True


if __name__ == "__main__":
    sys.exit(main())
