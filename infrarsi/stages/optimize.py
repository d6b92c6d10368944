"""optimize: the whole job from a goal — init (if needed), doctor (if stale), run, report, apply (if asked).

Each stage is the same function the CLI command of its name calls; this only decides which of
them the state in ``.infrarsi/`` still needs, and passes the goal's budgets and scope along.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from infrarsi.commandline import split_env
from infrarsi.contract import ContractError, contract_path, load_contract
from infrarsi.events import Event, EventSink, ignore
from infrarsi.goal import Goal, GoalError, parse_goal
from infrarsi.llm import load_llm_config
from infrarsi.records import DoctorError, RunResult, RunStatus, load_doctor
from infrarsi.stages.apply import ApplyResult, apply
from infrarsi.stages.doctor import doctor
from infrarsi.stages.init import init
from infrarsi.stages.report import ReportResult, report
from infrarsi.stages.run import run

DEFAULT_TRIALS = 20


@dataclass(kw_only=True, slots=True)
class OptimizeResult:
    status: RunStatus
    """ok (a candidate promoted) | no_promotion | interrupted | error."""
    message: str
    goal: Goal | None = None
    stages: list[str] = field(default_factory=list)
    """The stages that ran, in order."""
    run: RunResult | None = None
    report: ReportResult | None = None
    apply: ApplyResult | None = None


def _needs_init(repo: Path, goal: Goal, command: list[str] | None, cwd: Path | None) -> bool:
    """No contract yet, the goal asks for a budget or scope the contract does not have, or the
    owner gives a command the contract does not hold."""
    if not contract_path(repo).exists():
        return True
    contract = load_contract(repo)
    if command is not None:
        env, argv = split_env(command)
        w = contract.workload
        where = Path(cwd or repo).resolve()
        if (w.command_from, w.command, w.env) != ("user", argv, env) or where != (repo / w.cwd).resolve():
            return True
    if goal.budget_bytes is not None and goal.budget_bytes != contract.memory.budget_bytes:
        return True
    return any(path in contract.scope.editable for path in goal.exclude)


def _doctor_is_current(repo: Path) -> bool:
    try:
        report_ = load_doctor(repo)
    except DoctorError:
        return False
    return report_ is not None and report_.contract_hash == load_contract(repo).digest()


def optimize(
    repo: Path,
    goal_text: str,
    *,
    trials: int | None = None,
    minutes: float | None = None,
    do_apply: bool = False,
    doctor_repeats: int = 3,
    storage: str | None = None,
    use_bank: bool = True,
    on_event: EventSink = ignore,
    sandbox: bool = True,
    command: list[str] | None = None,
    cwd: Path | None = None,
    wait_for_quiet: float | None = None,
) -> OptimizeResult:
    """``command``: the owner's launch command (what followed ``--``), run from ``cwd``; see ``init``.
    ``wait_for_quiet``: seconds doctor and run may each wait for a busy machine (experiment/quiet.py)."""
    repo = Path(repo).resolve()
    llm = load_llm_config(repo)
    for warning in llm.warnings:
        on_event(Event(stage="optimize", kind="log", message=f"warning: {warning}"))
    try:
        goal = parse_goal(goal_text, llm)
    except GoalError as err:
        return OptimizeResult(status=RunStatus.ERROR, message=str(err))
    result = OptimizeResult(status=RunStatus.OK, message="", goal=goal)
    on_event(Event(stage="optimize", kind="log", message=f"goal: {goal.text} (read by {goal.understood_by})"))
    trials = trials if trials is not None else goal.trials
    minutes = minutes if minutes is not None else goal.minutes
    if trials is None and minutes is None:
        trials = DEFAULT_TRIALS
    try:
        if _needs_init(repo, goal, command, cwd):
            on_event(Event(stage="init", kind="begin", message="reading the training repo"))
            scope = [f"-{p}" for p in goal.exclude] or None
            done = init(repo, scope=scope, budget_bytes=goal.budget_bytes, command=command, cwd=cwd, llm=llm)
            on_event(Event(stage="init", kind="end", message=done.message))
            result.stages.append("init")
            if not done.ok:
                result.status, result.message = RunStatus.ERROR, done.message
                return result
        if not _doctor_is_current(repo):
            measured = doctor(repo, repeats=doctor_repeats, on_event=on_event, sandbox=sandbox,
                              wait_for_quiet=wait_for_quiet)
            result.stages.append("doctor")
            if not measured.ok:
                result.status, result.message = RunStatus.ERROR, measured.message
                return result
        result.run = run(repo, trials=trials, minutes=minutes, storage=storage, goal=goal.text, use_bank=use_bank,
                         on_event=on_event, sandbox=sandbox, wait_for_quiet=wait_for_quiet, llm=llm)
        result.stages.append("run")
        if result.run.status in (RunStatus.ERROR, RunStatus.INTERRUPTED):
            result.status, result.message = result.run.status, result.run.message
            return result
        result.report = report(repo, storage=storage)
        result.stages.append("report")
        if do_apply and result.run.promoted is not None:
            result.apply = apply(repo)
            result.stages.append("apply")
    except (ContractError, DoctorError) as err:
        result.status, result.message = RunStatus.ERROR, str(err)
        return result
    result.status = RunStatus.OK if result.run.promoted else RunStatus.NO_PROMOTION
    result.message = result.run.message
    if result.apply is not None:
        result.message += f"; {result.apply.message}"
    return result
