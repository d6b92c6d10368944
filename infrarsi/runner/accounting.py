"""Does a candidate's time add up, and did it train what the baseline trained?

A candidate that cannot fake its step times (InfraRSI's clock measures them) can still try to
move the work somewhere the clock does not count as steps: into start-up (train the measured
steps before the first one, then step through cached results), or after the last step. And one
that prints the right losses may train something else. Each check returns None when it holds, or
a sentence for ``TrialResult.detail`` / ``Verdict.reason``.

- :func:`time_problem`: the run's wall time, launch to exit on InfraRSI's clock, must be start-up
  plus the steps plus a short exit; a long tail is work the steps do not account for.
- :func:`startup_problem`: a candidate's start-up, compared with the baseline's in the same
  interleaved rounds, may not grow past the noise unless the candidate declares a one-off cost
  (compilation): the measured steps' work done before the first step would otherwise look free.
- :func:`checksum_problem`: the parameters after the measured steps (same seed, same steps) must
  match the baseline's: exactly when the losses match exactly (a bitwise-equivalent change), within
  :func:`checksum_tolerance` otherwise.
"""

from __future__ import annotations

import math
import os
import stat
import statistics
from pathlib import Path

from infrarsi.noise import LOSS_SAFETY

EXIT_SLACK_S = 2.0
"""Time allowed from the last step to the process's exit (the exit record, the interpreter's
teardown) before the tail counts as unaccounted work."""
EXIT_SLACK_FRACTION = 0.25
STARTUP_SLACK_S = 1.0
"""Start-up noise allowed in seconds, whatever the baseline's spread."""
STARTUP_SLACK_FRACTION = 0.25
EXACT_RTOL = 1e-6
"""Relative tolerance when the losses match exactly: float64 sums of the same float32 values in
another order, nothing more."""
MIN_RTOL = 1e-6


def time_problem(run_s: float | None, startup_s: float | None, step_s: list[float]) -> str | None:
    """Whether launch-to-exit is start-up + every step (warm-up included) + a short exit."""
    if run_s is None or startup_s is None or not step_s:
        return None
    accounted = startup_s + sum(step_s)
    tail = run_s - accounted
    if accounted > run_s * 1.01 + 0.05:
        return (f"the steps and start-up add up to {accounted:.2f} s, more than the {run_s:.2f} s the run lasted: "
                "its step times are not InfraRSI's")
    allowed = max(EXIT_SLACK_S, EXIT_SLACK_FRACTION * run_s)
    if tail > allowed:
        return (f"the run lasted {run_s:.2f} s but start-up ({startup_s:.2f} s) and {len(step_s)} steps "
                f"({sum(step_s):.2f} s) account for {accounted:.2f} s: {tail:.2f} s after the last step is "
                f"unaccounted work (allowed {allowed:.2f} s)")
    return None


def startup_problem(base: list[float], cand: list[float], *, declared_s: float | None = 0.0) -> str | None:
    """Whether the candidate's median start-up exceeds the baseline's by more than the baseline's
    own spread, the slack, and ``declared_s`` (a one-off cost the candidate declares; None: any)."""
    base = [s for s in base if s is not None]
    cand = [s for s in cand if s is not None]
    if declared_s is None or not base or not cand:
        return None
    b, c = statistics.median(base), statistics.median(cand)
    allowed = declared_s + startup_limit(base) - b
    if c - b > allowed:
        return (f"start-up {c:.2f} s against the baseline's {b:.2f} s in the same rounds: {c - b:.2f} s more "
                f"(allowed {allowed:.2f} s); work done before the first step is not measured as steps")
    return None


def startup_limit(base: list[float]) -> float:
    """The longest start-up the baseline's own runs (at least one) make plausible: their median
    plus their spread twice over, at least ``STARTUP_SLACK_S`` and ``STARTUP_SLACK_FRACTION`` of it."""
    b = statistics.median(base)
    return b + max(STARTUP_SLACK_S, STARTUP_SLACK_FRACTION * b, 2 * (max(base) - min(base)))


def startup_jumped(startup_s: float | None, limit_s: float | None) -> str:
    """Why a run's start-up says an earlier process left the machine slower (empty: it does not):
    longer than ``limit_s`` (doctor's ``startup_limit``); None for either: not judged."""
    if limit_s is None or startup_s is None or startup_s <= limit_s:
        return ""
    return (f"start-up {startup_s:.2f} s, beyond the {limit_s:.2f} s the baseline's runs in doctor allow: an "
            "earlier process left the machine slower (page cache, /dev/shm, a leftover process)")


PARAMS_FILE_LIMIT = 64 << 30
"""A parameters file larger than this is not read (the job's workspace is the job's to fill)."""


def params_checksum(paths: list[Path]) -> list[float] | None:
    """``[sum, sum of squares]`` in float64 over the tensors the launcher saved at the end of a run
    (rank 0's file, then the shards other ranks wrote), computed in this process; None when a file
    is missing or is not a list of tensors. The files lie in the job's workspace: each is read only
    when it is a regular file, without running any code in it (``weights_only``)."""
    import torch

    total = squares = 0.0
    for path in paths:
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode) or info.st_size > PARAMS_FILE_LIMIT:
                return None
            tensors = torch.load(path, map_location="cpu", weights_only=True)
        except Exception:  # a missing, truncated or forged file: no checksum, and the caller says so
            return None
        if not isinstance(tensors, list) or not all(isinstance(t, torch.Tensor) for t in tensors):
            return None
        with torch.no_grad():
            for t in tensors:
                x = t.to(torch.float64)
                total += float(x.sum())
                squares += float((x * x).sum())
    return [total, squares]


def checksum_tolerance(tolerance: float, reference: list[float], drift: float = 0.0) -> float:
    """The relative tolerance on the parameters, from the loss tolerance: the loss check allows
    ``tolerance`` on losses of size ``mean |reference|``, a relative change of the loss; the
    parameters are allowed the same relative change (never below MIN_RTOL), and at least
    ``LOSS_SAFETY`` times ``drift``, the change a run that only reorders float sums showed at that
    length (the parameters drift further over a long run than the first steps' losses do)."""
    scale = statistics.fmean(abs(x) for x in reference) if reference else 0.0
    from_loss = max(tolerance / scale, MIN_RTOL) if scale > 0 else MIN_RTOL
    return max(from_loss, LOSS_SAFETY * drift)


def checksum_drift(cand: list[float], base: list[float]) -> float:
    """How far the ``[sum, sum of squares]`` of one run's parameters is from another's, in the
    relative units ``checksum_problem`` compares with its tolerance."""
    (c_sum, c_sq), (b_sum, b_sq) = cand[:2], base[:2]
    norm = math.sqrt(max(b_sq, 0.0))
    return max(_relative(abs(c_sq - b_sq), 2 * abs(b_sq)), _relative(abs(c_sum - b_sum), abs(b_sum) + norm))


def _relative(change: float, scale: float) -> float:
    if scale:
        return change / scale
    return 0.0 if change == 0 else math.inf


def drift_at(drifts: dict[int, float], steps: int) -> float:
    """The reorder-only drift of the parameters expected after ``steps``: measured there, or the
    longest measured length's scaled in proportion to the steps."""
    if steps in drifts:
        return drifts[steps]
    if not drifts:
        return 0.0
    longest = max(drifts)
    return drifts[longest] * steps / longest


def checksum_problem(cand: list[float] | None, base: list[float] | None, *, rtol: float,
                     exact_losses: bool) -> str | None:
    """Whether the candidate's ``[sum, sum of squares]`` over the parameters matches the baseline's.

    The sum of squares (the squared norm) is compared relatively; the sum, which can be near zero,
    against the norm. With ``exact_losses`` (every compared loss equal to the reference) only
    float64 summation noise is allowed."""
    if not cand or not base:
        return None
    if any(not math.isfinite(x) for x in cand):
        return f"the parameters after the last step are not finite (checksum {cand})"
    tol = EXACT_RTOL if exact_losses else rtol
    (c_sum, c_sq), (b_sum, b_sq) = cand[:2], base[:2]
    if checksum_drift(cand, base) > tol:
        how = "the losses match the reference exactly but" if exact_losses else "beyond the tolerance"
        return (f"the parameters after the last step differ from the baseline's ({how}: sum {c_sum:.9g} vs "
                f"{b_sum:.9g}, sum of squares {c_sq:.9g} vs {b_sq:.9g}, relative tolerance {tol:.2g}): "
                "it did not train what the baseline trained")
    return None
