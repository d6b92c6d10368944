"""The contract's invariants, checked on what a trial set and reported.

Each check returns None when it holds, or a sentence saying what broke (for ``TrialResult.detail``).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from infrarsi.contract import Contract, LossInvariant, Workload, check_locked_files
from infrarsi.runner.measure import Step
from infrarsi.trials import Candidate

# How crashes from running out of memory read: the CPU allocator and Python; CUDA's caching
# allocator (ROCm builds say HIP); a raw CUDA call (a kernel's workspace, a library handle) failing
# with cudaErrorMemoryAllocation; cuBLAS unable to allocate its workspace.
_MEMORY_ERRORS = re.compile(
    r"(?:CUDA|HIP) out of memory|OutOfMemoryError|DefaultCPUAllocator: can't allocate memory|\bMemoryError\b"
    r"|CUDA (?:driver )?error: out of memory|CUBLAS_STATUS_ALLOC_FAILED"
)
MEMORY_TAIL_LINES = 200
"""How far back a crash's log is searched for an out-of-memory error: torchrun's failure summary
and shutdown warnings can push the worker's traceback well past the last 20 lines."""


def candidate_problem(contract: Contract, candidate: Candidate) -> str | None:
    """A candidate may only set knobs the contract knows, and never a workload invariant."""
    names = {k.name for k in contract.knobs}
    for name, value in candidate.knobs.items():
        if name not in names:
            return f"candidate sets knob {name!r}, which the contract does not define"
        knob = contract.knob(name)
        if knob.role == "workload" and value != knob.default:
            return f"knob {name!r} is part of the workload; {value!r} would change it from {knob.default!r}"
    return None


def scope_problem(contract: Contract, changed: list[str], workdir: Path) -> str | None:
    """Patches may change editable files only; every locked file must still hash as init saw it."""
    violations = check_locked_files(contract, workdir)
    if violations:
        v = violations[0]
        how = "changed" if v.path in changed else f"{v.reason} since init"
        return f"locked file {v.path} is {how}"
    outside = [p for p in changed if not contract.scope.allows(p)]
    if outside:
        return f"{outside[0]} changed, but it is outside the editable scope {contract.scope.editable}"
    return None


def tokens_problem(steps: list[Step], expected: int, expected_samples: int | None = 0) -> str | None:
    """Every step must consume the contract's tokens (and samples) per step. 0 in the contract: init
    could not derive it; doctor learns it from the baseline's steps (None samples: not fixed either)."""
    for step in steps:
        if expected and step.tokens is not None and step.tokens != expected:
            return f"step {step.index} reported {step.tokens} tokens; the contract fixes {expected} per step"
        if expected_samples and step.samples is not None and step.samples != expected_samples:
            return (f"step {step.index} reported {step.samples} samples; the contract fixes "
                    f"{expected_samples} per step")
    return None


def unsized_steps_problem(steps: list[Step], workload: Workload) -> str | None:
    """A step that says nothing of its size could be any size: when the contract fixes the tokens
    (or samples) per step, every step must report them."""
    if not (workload.tokens_per_step or workload.samples_per_step):
        return None
    unsized = [s.index for s in steps if s.tokens is None and s.samples is None]
    if unsized:
        fixed = (f"{workload.tokens_per_step} tokens" if workload.tokens_per_step
                 else f"{workload.samples_per_step} samples")
        return (f"{len(unsized)} of {len(steps)} steps reported neither tokens nor samples (step {unsized[0]} "
                f"first); the contract fixes {fixed} per step, and a step that does not say its size cannot "
                "be compared")
    return None


def loss_problem(steps: list[Step], loss: LossInvariant, *, compare: bool, by_design: bool) -> str | None:
    """No NaN or inf ever; with ``compare``, the first K losses within tolerance of the reference."""
    for step in steps:
        if not math.isfinite(step.loss):
            return f"loss is {step.loss} at step {step.index}"
    if not compare:
        return None
    tolerance = loss.numerics_tolerance if by_design else loss.tolerance
    kind = "numerics-by-design tolerance" if by_design else "tolerance"
    for step in steps:
        if step.index < min(loss.compare_steps, len(loss.reference)):
            gap = abs(step.loss - loss.reference[step.index])
            if gap > tolerance:
                return (
                    f"loss {step.loss:.6g} at step {step.index} is {gap:.3g} off the reference "
                    f"{loss.reference[step.index]:.6g} ({kind} {tolerance:.3g})"
                )
    return None


def memory_error(tail: str) -> bool:
    """Whether a crash's output says it ran out of memory."""
    return memory_error_line(tail) is not None


def memory_error_line(text: str) -> str | None:
    """The last line of a crash's output that says it ran out of memory, or None."""
    return next((line.strip() for line in reversed(text.splitlines()) if _MEMORY_ERRORS.search(line)), None)


def log_tail(path: Path, lines: int = 20) -> str:
    """The last non-empty lines of a log: where the error is."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 65536))
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    kept = [line for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])
