"""What the last run measured about a patch or a knob setting, in the words the editor shows.

Reads ``RunResult`` as ``.infrarsi/run.json`` holds it: verdicts of the re-verified candidates,
the patch validations, prior checks (observed log effects per ``knob=value`` / ``patch:name``
key) and memory prices (fitted log change of the peak per key).
"""

from __future__ import annotations

import math

from infrarsi.byte_units import MIB
from infrarsi.contract import Knob, KnobValue
from infrarsi.records import RunResult
from infrarsi.settings import patch_key, setting_key


def _times(factor: float) -> str:
    return f"{factor:.2f}×"


def _pct(log_effect: float) -> str:
    return f"{math.expm1(log_effect) * 100:+.0f}%"


def time_effect(run: RunResult, key: str) -> str | None:
    """``step time 0.91× (observed over 4 trials; prior 0.97×)`` for a key the run checked."""
    for check in run.prior_checks:
        if check.key != key or check.quantity != "time" or check.observed is None:
            continue
        text = f"step time {_times(math.exp(check.observed))} (observed over {check.n_trials} trials"
        if check.prior_mean is not None:
            text += f"; prior {_times(math.exp(check.prior_mean))}"
        if check.miscalibrated:
            text += "; the prior was wrong"
        return text + ")"
    return None


def memory_price(run: RunResult, key: str) -> str | None:
    """``peak memory +12% (+80 MiB)`` for a key the run priced."""
    for price in run.memory_prices:
        if price.key != key or price.log_effect is None:
            continue
        text = f"peak memory {_pct(price.log_effect)}"
        if price.bytes_at_baseline is not None:
            text += f" ({price.bytes_at_baseline / MIB:+.0f} MiB)"
        return text
    return None


def promoted_speedup(run: RunResult) -> str | None:
    verdict = run.promoted
    if verdict is None or not verdict.job_speedup:
        return None
    point, low, _ = verdict.job_speedup
    return f"{point:.2f}× faster (95% CI low {low:.2f}×)"


def patch_status(run: RunResult | None, name: str) -> str:
    """The diagnostic's verdict on one patch: verified with its effect and run id, or not yet."""
    if run is None:
        return "not yet verified"
    run_id = run.run_id
    promoted = run.promoted
    parts = []
    if promoted is not None and name in promoted.candidate.patches:
        parts.append(f"verified in run {run_id}: part of the promoted candidate, {promoted_speedup(run)}")
    check = next((c for c in run.patch_checks if c.name == name), None)
    effect = time_effect(run, patch_key(name))
    price = memory_price(run, patch_key(name))
    if check is not None and check.status not in ("validated", "skipped"):
        parts.append(f"failed validation in run {run_id}: {check.status}")
    elif check is not None and check.status == "skipped":
        parts.append(f"skipped in run {run_id}: {check.reason}")
    elif not parts and (effect or check is not None):
        parts.append(f"measured in run {run_id}" + ("" if effect else ": validated, effect not yet separable"))
    parts += [p for p in (effect, price) if p]
    return "; ".join(parts) if parts else "not yet verified"


def setting_lines(run: RunResult, knob: Knob) -> list[str]:
    """One line per value of the knob that the run measured: time effect and memory price."""
    out = []
    for value in knob.domain:
        key = setting_key(knob.name, value)
        found = [p for p in (time_effect(run, key), memory_price(run, key)) if p]
        if found:
            out.append(f"{knob.name}={value}: " + ", ".join(found))
    return out


def promoted_value(run: RunResult | None, knob: Knob) -> KnobValue | None:
    """The promoted candidate's value for this knob, when it differs from the default."""
    promoted = run.promoted if run is not None else None
    if promoted is None or knob.name not in promoted.candidate.knobs:
        return None
    value = promoted.candidate.knobs[knob.name]
    return None if value == knob.default else value
