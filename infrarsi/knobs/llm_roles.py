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
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infrarsi.knobs.raw import RawKnob
from infrarsi.knobs.source import ParsedFile
from infrarsi.llm import LLMConfig, MalformedReply, call_tool
from infrarsi.records.files import claims_path

if TYPE_CHECKING:
    from anthropic.types import ToolParam

TOOL_NAME = "classify_knobs"
CLAIMABLE = ("micro_batch", "grad_accum", "threads", "dataloader_workers", "dataloader_pin_memory",
             "activation_checkpointing", "compile", "dtype", "optimizer_impl", "attention_impl", "eval_batch",
             "logging", "workload", "unknown")

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


def tool_definition(names: list[str]) -> ToolParam:
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


def parse_claims(data: Any, names: list[str]) -> list[Claim]:
    """The claims in the tool call's input, or :class:`MalformedReply` saying what is wrong."""
    if not isinstance(data, dict) or set(data) != {"claims"} or not isinstance(data["claims"], list):
        raise MalformedReply(f"{TOOL_NAME} input must be exactly {{'claims': [...]}}")
    out: dict[str, Claim] = {}
    for i, item in enumerate(data["claims"]):
        where = f"claims[{i}]"
        if not isinstance(item, dict) or set(item) != {"name", "role", "evidence"}:
            raise MalformedReply(f"{where} must have exactly name, role and evidence")
        name, role, evidence = item["name"], item["role"], item["evidence"]
        if name not in names:
            raise MalformedReply(f"{where}: {name!r} was not asked about")
        if name in out:
            raise MalformedReply(f"{where}: {name!r} twice")
        if role not in CLAIMABLE:
            raise MalformedReply(f"{where}: unknown role {role!r}")
        if not isinstance(evidence, str):
            raise MalformedReply(f"{where}: evidence must be a string")
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
    names = [k.name for k in knobs]
    reply = call_tool(config, tool_definition(names), prompt(knobs, uses), lambda data: parse_claims(data, names),
                      system=SYSTEM)
    if not reply.ok or reply.value is None:  # an ok reply holds its parsed claims
        return ClaimsResult("error", message=f"{reply.message}; unknown knobs stay locked")
    return ClaimsResult("ok", reply.value)


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
