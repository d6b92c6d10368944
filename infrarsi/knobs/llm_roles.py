"""What the configured model says about knobs the rules leave ``unknown``, and when to believe it.

The model answers through one tool whose schema admits only the knobs asked about and a fixed set
of roles (:data:`CLAIMABLE`); the reply is checked again here, strictly (every key known, no knob
twice). A claim changes nothing by itself: a ``workload`` claim only confirms the lock, and any
other claim stays ``unconfirmed`` until :func:`judge` compares a trial with the claimed knob
changed against the baseline and the measurement agrees:

- ``micro_batch``: the tokens (or samples) per optimizer step hold and peak memory moves;
- ``threads``: the tokens per step and the loss trajectory hold, and the job's CPU use moves (the
  cores' worth its process tree used over the measured steps, ``runner/interference.py``);
- the other speed roles: the tokens per step and the loss trajectory hold, and the step time moves
  beyond the baseline's noise (the value does act on the job).

Without a key nothing is called (``status = "not_configured"``). Every failure comes back as a
status with a message, never an exception. Init keeps the claims in ``.infrarsi/claims.json``
(:func:`save_claims`); doctor runs the trials that judge them (``stages/claims.py``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from infrarsi.contract import STATE_DIR
from infrarsi.knobs.discover import RawKnob
from infrarsi.knobs.source import ParsedFile
from infrarsi.llm import LLMConfig, make_client
from infrarsi.runner.result import TrialResult, TrialStatus

TOOL_NAME = "classify_knobs"
CLAIMABLE = ("micro_batch", "grad_accum", "threads", "dataloader_workers", "dataloader_pin_memory",
             "activation_checkpointing", "compile", "dtype", "optimizer_impl", "attention_impl", "eval_batch",
             "logging", "workload", "unknown")
MEMORY_MOVES = 0.05
"""A peak-memory change below this share is noise, not evidence of a micro-batch."""
CPU_MOVES = 0.2
"""A change of the job's CPU use (cores' worth) below this share is not evidence of a thread count."""
TIME_MOVES = 0.05

SYSTEM = """You are a performance engineer classifying the command-line settings of a PyTorch training
script. For each setting, say what role it plays, judging from the code that uses it:
micro_batch (sequences per forward pass while accumulation keeps the global batch), grad_accum,
threads, dataloader_workers, dataloader_pin_memory, activation_checkpointing, compile, dtype,
optimizer_impl, attention_impl, eval_batch (evaluation only), logging (only how often to print),
workload (anything that changes what is computed: model shape, data, loss, learning rate, seed,
global batch, step count), or unknown. When unsure, answer workload or unknown.
Answer only by calling the classify_knobs tool, once, with every setting listed."""


@dataclass(frozen=True, slots=True)
class Claim:
    name: str
    role: str
    evidence: str
    """The code the model bases it on, in its words."""
    status: str = "unconfirmed"
    """unconfirmed | confirmed | refuted (``workload`` and ``unknown`` claims are confirmed: they lock)."""
    why: str = ""


@dataclass(slots=True)
class ClaimsResult:
    status: str
    """ok | not_configured | error."""
    claims: list[Claim] = field(default_factory=list)
    message: str = ""


class MalformedClaims(ValueError):
    pass


def tool_definition(names: list[str]) -> dict[str, Any]:
    claim = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "enum": names},
            "role": {"type": "string", "enum": list(CLAIMABLE)},
            "evidence": {"type": "string", "description": "the code that shows it, one line"},
        },
        "required": ["name", "role", "evidence"],
        "additionalProperties": False,
    }
    return {
        "name": TOOL_NAME,
        "description": "Record the role of each setting.",
        "input_schema": {"type": "object", "properties": {"claims": {"type": "array", "items": claim}},
                         "required": ["claims"], "additionalProperties": False},
    }


def prompt(knobs: list[RawKnob], uses: Mapping[str, list[str]]) -> str:
    lines = ["Settings to classify (name, default, help, then the lines of code that mention it):"]
    for k in knobs:
        lines.append(f"- {k.name} (default {k.default!r}; flag {k.flag or 'none'}; help: {k.help or 'none'})")
        lines += [f"    {u}" for u in uses.get(k.name, [])[:8]] or ["    (no use found)"]
    return "\n".join(lines)


def parse_claims(message: Any, names: list[str]) -> list[Claim]:
    calls = [b for b in message.content if getattr(b, "type", None) == "tool_use" and b.name == TOOL_NAME]
    if len(calls) != 1:
        raise MalformedClaims(f"expected one {TOOL_NAME} call, got {[getattr(b, 'type', '?') for b in message.content]}")
    data = calls[0].input
    if not isinstance(data, dict) or set(data) != {"claims"} or not isinstance(data["claims"], list):
        raise MalformedClaims(f"{TOOL_NAME} input must be exactly {{'claims': [...]}}")
    out: dict[str, Claim] = {}
    for i, item in enumerate(data["claims"]):
        where = f"claims[{i}]"
        if not isinstance(item, dict) or set(item) != {"name", "role", "evidence"}:
            raise MalformedClaims(f"{where} must have exactly name, role and evidence")
        name, role, evidence = item["name"], item["role"], item["evidence"]
        if name not in names:
            raise MalformedClaims(f"{where}: {name!r} was not asked about")
        if name in out:
            raise MalformedClaims(f"{where}: {name!r} twice")
        if role not in CLAIMABLE:
            raise MalformedClaims(f"{where}: unknown role {role!r}")
        if not isinstance(evidence, str):
            raise MalformedClaims(f"{where}: evidence must be a string")
        locks = role in ("workload", "unknown")
        out[name] = Claim(name, role, evidence.strip(), "confirmed" if locks else "unconfirmed",
                          "it stays locked" if locks else "needs a measurement")
    return list(out.values())


def classify_unknown(config: LLMConfig, knobs: list[RawKnob], uses: Mapping[str, list[str]]) -> ClaimsResult:
    """The model's claims about ``knobs`` (those the rules left unknown)."""
    if not knobs:
        return ClaimsResult("ok")
    if not config.configured:
        return ClaimsResult("not_configured", message="no API key configured: unknown knobs stay locked")
    import anthropic

    names = [k.name for k in knobs]
    try:
        message = make_client(config).messages.create(
            model=config.model, max_tokens=config.max_tokens, system=SYSTEM, tools=[tool_definition(names)],
            tool_choice={"type": "tool", "name": TOOL_NAME},
            messages=[{"role": "user", "content": prompt(knobs, uses)}])
        return ClaimsResult("ok", parse_claims(message, names))
    except MalformedClaims as err:
        return ClaimsResult("error", message=f"malformed reply: {err}; unknown knobs stay locked")
    except (anthropic.AnthropicError, ValueError) as err:
        return ClaimsResult("error", message=f"{type(err).__name__}: {err}; unknown knobs stay locked")


def knob_uses(files: list[ParsedFile], names: list[str]) -> dict[str, list[str]]:
    """``file:line: code`` of every line that mentions each name (as ``.name`` or a bare word)."""
    out: dict[str, list[str]] = {n: [] for n in names}
    patterns = {n: re.compile(rf"(\.|\b){re.escape(n)}\b") for n in names}
    for f in files:
        for i, line in enumerate(f.module.code.splitlines(), 1):
            for n, pattern in patterns.items():
                if pattern.search(line):
                    out[n].append(f"{f.rel}:{i}: {line.strip()[:160]}")
    return out


def _moved(a: float | None, b: float | None, share: float) -> bool:
    return a is not None and b is not None and b > 0 and abs(a / b - 1) > share


def _same_work(base: TrialResult, probe: TrialResult) -> bool:
    if base.tokens_per_step is not None or probe.tokens_per_step is not None:
        return base.tokens_per_step == probe.tokens_per_step
    return base.samples_per_step == probe.samples_per_step


def judge(claim: Claim, baseline: TrialResult, probe: TrialResult, loss_tolerance: float,
          time_moves: float = TIME_MOVES) -> Claim:
    """``claim`` confirmed or refuted by a trial with the claimed knob changed (``probe``);
    ``time_moves``: the step-time change that is more than noise (doctor's floor, at least TIME_MOVES)."""
    if claim.status != "unconfirmed":
        return claim

    def verdict(confirmed: bool | None, why: str) -> Claim:
        status = "unconfirmed" if confirmed is None else "confirmed" if confirmed else "refuted"
        return replace(claim, status=status, why=why)

    if not baseline.ok:
        return verdict(None, "the baseline did not finish")
    if probe.status is TrialStatus.DISTURBED:
        return verdict(None, f"the trial with it changed was disturbed by other processes: {probe.detail[:200]}")
    if not probe.ok:
        return verdict(False, f"the trial with it changed ended {probe.status.value}: {probe.detail[:200]}")
    if not _same_work(baseline, probe):
        return verdict(False, f"the work per step changed ({baseline.tokens_per_step or baseline.samples_per_step} -> "
                              f"{probe.tokens_per_step or probe.samples_per_step}): it is the workload")
    if claim.role == "micro_batch":
        if _moved(probe.peak_bytes, baseline.peak_bytes, MEMORY_MOVES):
            return verdict(True, "the tokens per step held and peak memory moved")
        return verdict(False, "peak memory did not move")
    pairs = list(zip(baseline.losses, probe.losses))
    if not pairs or any(not math.isfinite(b) or abs(a - b) > loss_tolerance * max(1.0, abs(b)) for b, a in pairs):
        return verdict(False, "the loss trajectory changed")
    cpu = [(r.interference or {}).get("mean_job_cores") for r in (baseline, probe)]
    if claim.role == "threads" and None not in cpu:
        if _moved(cpu[1], cpu[0], CPU_MOVES):
            return verdict(True, f"the loss held and the job's CPU use moved ({cpu[0]:.2f} -> {cpu[1]:.2f} cores)")
        return verdict(False, f"the job's CPU use did not move ({cpu[0]:.2f} -> {cpu[1]:.2f} cores)")
    if not _moved(probe.step_time, baseline.step_time, max(time_moves, TIME_MOVES)):
        return verdict(False, "the step time did not move")
    return verdict(True, "the loss held and the step time moved")


def claims_path(repo: Path) -> Path:
    return Path(repo) / STATE_DIR / "claims.json"


def save_claims(repo: Path, claims: list[Claim]) -> None:
    """Keep ``claims`` for doctor (an empty list clears an earlier init's)."""
    path = claims_path(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([asdict(c) for c in claims], indent=2) + "\n")


def load_claims(repo: Path) -> tuple[list[Claim], str]:
    """The claims init kept, and why none could be read (empty when the file is fine or absent)."""
    path = claims_path(repo)
    if not path.exists():
        return [], ""
    try:
        data = json.loads(path.read_text())
        return [Claim(**{k: str(item[k]) for k in ("name", "role", "evidence", "status", "why")}) for item in data], ""
    except (ValueError, TypeError, KeyError) as err:
        return [], f"{path}: unreadable ({type(err).__name__}: {err}); run `infrarsi init` again to ask the model anew"
