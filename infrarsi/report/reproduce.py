"""The command a person runs to get a configuration back: the owner's command with the settings the
script takes as flags or variables, at the length every trial told the job.

Settings with no flag and patches are not in it: a trial writes them into its own copy of the
source (``runner.command.source_knobs``, ``patches_to_apply``), so the command reproduces such a
configuration only on the branch ``infrarsi apply`` commits (``report.model.Audit.in_source``).
"""

from __future__ import annotations

import shlex

from infrarsi.contract import Contract, KnobValue
from infrarsi.launcher.settings import settings_env
from infrarsi.report.setting import changed_knobs
from infrarsi.runner.command import build_argv, job_steps, step_knob
from infrarsi.trials import Candidate


def reproduce_command(candidate: Candidate, contract: Contract) -> str:
    """The workload's command with the candidate's flags, as a person would type it."""
    values: dict[str, KnobValue] = {}
    steps = step_knob(contract)
    # Every trial told the job the owner's length (job_steps); the command's own step flag
    # (workload.args) is the contract's short trial length, not the job's.
    if steps is not None and steps.flag and (job_steps(contract) != steps.default
                                             or steps.flag.lstrip("-") in contract.workload.args):
        values[steps.name] = job_steps(contract)
    # The contract's overrides (a device this machine has) are part of the baseline as it ran.
    values.update({**contract.workload.overrides, **changed_knobs(candidate, contract)})
    flagged = {k: v for k, v in values.items() if contract.knob(k).flag}
    argv = build_argv(contract, flagged, as_written=True)
    env = {**contract.workload.env, **settings_env(contract, values, for_person=True)}
    command = shlex.join([*(f"{k}={v}" for k, v in env.items()), *argv])
    cwd = contract.workload.cwd
    return command if cwd in ("", ".") else f"cd {shlex.quote(cwd)} && {command}"
