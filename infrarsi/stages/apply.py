"""apply: commit a promoted candidate on a new branch, with the evidence in the message.

The change is built in a temporary git worktree at the contract's base commit: patches applied,
launch settings written where the script reads them. Anything outside the editable scope refuses
the whole apply. The user's working tree and checked-out branch stay exactly as they were.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import git

from infrarsi import patches as patch_library
from infrarsi import vcs
from infrarsi.byte_units import MIB
from infrarsi.contract import Contract, KnobValue, require_intact
from infrarsi.knobs.rewrite import set_defaults
from infrarsi.launcher.settings import settings_env
from infrarsi.records import RunResult, load_run
from infrarsi.records.evidence import NOTES_REF, CommitEvidence
from infrarsi.records.files import patch_dir, state_dir
from infrarsi.report.reproduce import reproduce_command
from infrarsi.runner.command import patches_to_apply
from infrarsi.trials import Candidate
from infrarsi.whole_process import Verdict

RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{4}")
"""What stages/run.py's new_run_id writes."""


class ApplyStatus(StrEnum):
    COMMITTED = "committed"
    DRY_RUN = "dry_run"
    REFUSED = "refused"
    """Nothing was written: the working tree or the change is not one apply may commit."""
    ERROR = "error"


@dataclass(kw_only=True, slots=True)
class ApplyResult:
    status: ApplyStatus
    message: str
    branch: str = ""
    commit: str = ""
    base: str = ""
    diff: str = ""
    paths: list[str] = field(default_factory=list)
    """Repo-relative paths the change touches (all inside the editable scope)."""
    flags: list[str] = field(default_factory=list)
    """Launch settings that could not be written into an editable file: pass them on the command line."""
    commit_message: str = ""


def _changed_settings(contract: Contract, candidate: Candidate) -> dict[str, KnobValue]:
    return {name: value for name, value in candidate.knobs.items() if contract.knob(name).default != value}


def _write_settings(checkout: Path, contract: Contract, settings: dict[str, KnobValue]) -> list[str]:
    """Rewrite each changed knob's default in the editable file that defines it; flags for the rest."""
    by_file: dict[str, dict[str, KnobValue]] = {}
    flags: list[str] = []
    for name, value in settings.items():
        knob = contract.knob(name)
        path = knob.source_path or contract.workload.entry
        if knob.flag_style == "env":  # a launcher setting: the variables that give it
            flags += [f"{k}={v}" for k, v in settings_env(contract, {name: value}, for_person=True).items()]
        elif contract.scope.allows(path):
            by_file.setdefault(path, {})[name] = value
        else:
            flags += knob.render(value)
    for path, values in by_file.items():
        target = checkout / path
        target.write_text(set_defaults(target.read_text(), values))
    return flags


def commit_message(run: RunResult, verdict: Verdict, contract: Contract, paths: list[str], flags: list[str]) -> str:
    point, low, high = verdict.job_speedup or (float("nan"),) * 3
    settings = ", ".join(f"{k}={v}" for k, v in _changed_settings(contract, verdict.candidate).items()) or "none"
    patches = ", ".join(patches_to_apply(contract, verdict.candidate)) or "none"
    statuses: dict[str, int] = {}
    for row in run.trials:
        statuses[row.status] = statuses.get(row.status, 0) + 1
    budget = contract.memory.budget_bytes
    lines = [
        f"infrarsi: {point:.2f}x faster training job (95% CI {low:.2f}-{high:.2f}x)",
        "",
        f"Run {run.run_id}, measured by InfraRSI on this machine and verified against the baseline.",
        "",
        f"Launch settings: {settings}",
        f"Patches: {patches}",
        # The settings and patches are in this commit's source: the command with its flags runs it.
        f"Reproduce at this commit: {reproduce_command(verdict.candidate, contract)}",
        "",
        "Evidence:",
        f"  job-time speedup {point:.3f}x at {contract.workload.planned_steps} steps, 95% CI [{low:.3f}, {high:.3f}] "
        f"over {len(verdict.cand_job_s)} interleaved rounds of whole processes timed by InfraRSI "
        f"(promotion floor {run.promotion_floor:.3f}; one run alone would need {run.noise_floor:.3f})",
    ]
    if verdict.base_step_s and verdict.cand_step_s:
        lines.append(f"  step time {statistics.median(verdict.base_step_s) * 1000:.1f} ms -> "
                     f"{statistics.median(verdict.cand_step_s) * 1000:.1f} ms (whole processes, median of "
                     f"{len(verdict.cand_step_s)} rounds)")
    if verdict.record_step_speedup and verdict.step_speedup:
        lines.append(f"  per step by the job's own step records: {verdict.record_step_speedup[0]:.3f}x "
                     f"(whole processes: {verdict.step_speedup[0]:.3f}x)")
    if verdict.max_loss_diff is not None:
        lines.append(f"  loss: max |candidate - baseline| = {verdict.max_loss_diff:.2e} over {contract.loss.compare_steps} steps "
                     f"(tolerance {contract.loss.tolerance:.1e})")
    if verdict.peak_bytes:
        lines.append(f"  peak memory {verdict.peak_bytes / MIB:.0f} MiB (budget {budget / MIB:.0f} MiB)")
    lines.append(f"  trials: {len(run.trials)} ({', '.join(f'{n} {s}' for s, n in sorted(statuses.items()))}), "
                 f"{run.spent_s:.0f} s of trials")
    if flags:
        lines += ["", "Pass on the command line (defined outside the editable scope; VAR=value: in the environment):",
                  "  " + " ".join(flags)]
    lines += ["", "Audited paths (all inside the editable scope):", *[f"  {p}" for p in paths]]
    return "\n".join(lines) + "\n"


def _touched(wt: git.Repo, place: vcs.GitPlace) -> list[str]:
    """Every path the change created, modified or removed in the checkout, untracked and ignored
    files included (a file git would not commit is still one the change wrote)."""
    status = wt.git.status("--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching")
    entries = status.split("\0")
    paths, i = [], 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if not entry:
            continue
        if entry[0] in "RC":  # a rename or copy names its source in the next entry
            i += 1
        path = entry[3:]
        if place.prefix:
            if not path.startswith(place.prefix + "/"):
                paths.append("../" + path)
                continue
            path = path.removeprefix(place.prefix + "/")
        paths.append(path)
    return sorted(paths)


def _pick(run: RunResult, candidate: int | None) -> Verdict | None:
    if candidate is None:
        return run.promoted
    for verdict in run.verdicts:
        if verdict.promoted and any(row.number == candidate and row.candidate == verdict.candidate.to_dict() for row in run.trials):
            return verdict
    return None


def apply(repo: Path, *, candidate: int | None = None, dry_run: bool = False) -> ApplyResult:
    """Commit the promoted candidate (or the promoted one that trial ``candidate`` measured)."""
    repo = Path(repo).resolve()
    contract = require_intact(repo)
    run = load_run(repo)
    if run is None:
        return ApplyResult(status=ApplyStatus.ERROR, message=f"no run recorded in {state_dir(repo)}; run `infrarsi run {repo}` first")
    verdict = _pick(run, candidate)
    if verdict is None:
        which = f"trial {candidate} is not a promoted candidate" if candidate is not None else "the last run promoted no candidate"
        return ApplyResult(status=ApplyStatus.ERROR, message=f"{which}; nothing verified to apply")
    place = vcs.locate(repo)
    if place is None:
        return ApplyResult(status=ApplyStatus.ERROR, message=(
            f"{repo} is not in a git repository. InfraRSI commits changes on a new branch for review and "
            "will not create a repository for you: run `git init && git add -A && git commit -m base` there first."))
    dirty = vcs.dirty(place, contract.scope.editable)
    if dirty:
        return ApplyResult(status=ApplyStatus.REFUSED, message=(
            "uncommitted changes in the editable scope: " + ", ".join(dirty) + ". Commit or stash them first."))
    base = contract.base_commit or vcs.head_commit(repo)
    branch = f"infrarsi/{run.run_id}"
    # run.json is a file in the repo anyone may edit: its run_id names the branch, so it is checked
    # before anything is built.
    if not RUN_ID.fullmatch(run.run_id) or not vcs.valid_branch(place, branch):
        return ApplyResult(status=ApplyStatus.REFUSED, message=(
            f"run.json's run_id {run.run_id!r} is not one InfraRSI writes (YYYYMMDD-HHMMSS-xxxx); "
            f"run `infrarsi run {repo}` again"))
    if not dry_run and vcs.branch_exists(place, branch):
        return ApplyResult(status=ApplyStatus.REFUSED, message=f"branch {branch} already exists; it holds this run's commit")
    try:
        with vcs.worktree(place, base) as checkout:
            # LLM diffs are where the run stored them, in the user's state folder: the checkout
            # is a fresh worktree of the base commit, without InfraRSI's untracked state.
            outcomes = patch_library.apply_patches(checkout, list(patches_to_apply(contract, verdict.candidate)), contract,
                                                   contract.memory.device, diff_dir=patch_dir(repo))
            failed = [o for o in outcomes if o.status == "failed"]
            if failed:
                return ApplyResult(status=ApplyStatus.ERROR, message=f"patch {failed[0].name} no longer applies: {failed[0].reason}")
            flags = _write_settings(checkout, contract, _changed_settings(contract, verdict.candidate))
            wt = git.Repo(checkout, search_parent_directories=True)
            changed = _touched(wt, place)
            outside = [p for p in changed if not contract.scope.allows(p)]
            if outside:
                return ApplyResult(status=ApplyStatus.REFUSED, message=f"the change touches files outside the editable scope: {', '.join(outside)}")
            diff = wt.git.diff()
            message = commit_message(run, verdict, contract, changed, flags)
            if dry_run:
                return ApplyResult(status=ApplyStatus.DRY_RUN, message="dry run: nothing written", base=base, diff=diff,
                                   paths=changed, flags=flags, commit_message=message)
            sha = vcs.commit_on_branch(checkout, place, changed, message, branch)
        vcs.add_note(place, sha, CommitEvidence.of(run, verdict).to_json(), NOTES_REF)
    except git.GitCommandError as err:
        return ApplyResult(status=ApplyStatus.ERROR, message=f"git failed: {err.stderr.strip() or err}")
    except vcs.HookRefused as err:  # the user's pre-commit or commit-msg hook said no
        return ApplyResult(status=ApplyStatus.ERROR, message=str(err))
    return ApplyResult(status=ApplyStatus.COMMITTED, message=f"committed {sha[:10]} on branch {branch}", branch=branch,
                       commit=sha, base=base, diff=diff, paths=changed, flags=flags, commit_message=message)
