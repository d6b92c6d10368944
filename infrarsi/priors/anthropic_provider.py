"""Priors from an Anthropic model, asked through a tool so the reply is structured.

The model is given the contract's tunable knobs, the patches, the hardware, the doctor profile
and the editable sources, and must call ``record_priors`` with one entry per key it has a
belief about. The reply is validated strictly (every key known, numbers finite and in range,
sds positive, no duplicates); anything else, and every transport failure, yields an ERROR
result carrying the built-in table and the reason. Keys the model skips keep their built-in prior.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from infrarsi.llm import LLMConfig, MalformedReply, call_tool, doctor_for_model
from infrarsi.priors.builtin import builtin_table
from infrarsi.priors.types import (
    MAX_ABS_LOG,
    MAX_SD,
    Prior,
    PriorContext,
    PriorResult,
    PriorStatus,
    PriorTable,
)

if TYPE_CHECKING:
    from anthropic.types import ToolParam

TOOL_NAME = "record_priors"
MAX_SOURCE_CHARS = 60_000
"""All editable sources together; beyond this each file is cut (the prompt must stay affordable)."""
MAX_DOCTOR_CHARS = 8_000
MAX_STARTUP_S = 3600.0

SYSTEM = """\
You are an ML infrastructure engineer estimating, before any measurement, how settings and source
patches change a PyTorch training job's step time and peak memory on the given hardware.
Express each effect as a natural-log multiplicative factor relative to the baseline (the knob's
default, the patch not applied): log(0.8) means 20% less. Give each a standard deviation (in log
units, > 0) that reflects your confidence. Be specific to the hardware: CPU and GPU differ.
Answer only by calling the record_priors tool, once, with keys exactly as listed."""


def tool_definition(keys: list[str]) -> ToolParam:
    number = {"type": "number"}
    sd = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_SD}
    entry = {
        "type": "object",
        "properties": {
            "key": {"type": "string", "enum": keys},
            "time_log_mean": number,
            "time_log_sd": sd,
            "mem_log_mean": number,
            "mem_log_sd": sd,
            "startup_s": {"type": "number", "minimum": 0, "description": "one-time start-up cost, seconds"},
            "rationale": {"type": "string", "description": "one sentence: why"},
        },
        "required": ["key", "time_log_mean", "time_log_sd", "mem_log_mean", "mem_log_sd", "rationale"],
    }
    return {
        "name": TOOL_NAME,
        "description": "Record the prior effect of each setting and patch on step time and peak memory.",
        "input_schema": {
            "type": "object",
            "properties": {"priors": {"type": "array", "items": entry}},
            "required": ["priors"],
        },
    }


def _sources(sources: Mapping[str, str]) -> str:
    per_file = MAX_SOURCE_CHARS // max(len(sources), 1)
    parts = []
    for path, text in sources.items():
        cut = text if len(text) <= per_file else text[:per_file] + f"\n# … cut ({len(text) - per_file} more chars)"
        parts.append(f"--- {path}\n{cut}")
    return "\n".join(parts) or "(none)"


def prompt(context: PriorContext, keys: list[str]) -> str:
    contract, hw = context.contract, context.hardware
    workload = contract.workload
    knobs = [{"name": k.name, "role": k.role, "default": k.default, "domain": k.domain, "help": k.help}
             for k in contract.tunable]
    shown = doctor_for_model(context.doctor)
    doctor = json.dumps(shown, default=str)[:MAX_DOCTOR_CHARS] if shown else "(not run)"
    return "\n\n".join([
        f"Hardware: {hw.device}, {hw.describe()}.",
        f"Workload: launcher {workload.launcher}, {workload.tokens_per_step} tokens per optimizer step, "
        f"sequence length {workload.seq_len}, global batch {workload.global_batch}, "
        f"{workload.planned_steps} planned steps. Memory budget {contract.memory.budget_bytes} bytes.",
        "Tunable knobs (JSON):\n" + json.dumps(knobs, default=str),
        "Patches available: " + (", ".join(context.patches) or "(none)"),
        "Doctor profile (JSON):\n" + doctor,
        "Editable sources:\n" + _sources(context.sources),
        "Keys to estimate (one entry each; the baseline values' effect is 0):\n" + "\n".join(keys),
    ])


def _number(item: Mapping[str, Any], name: str, where: str) -> float:
    value = item.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MalformedReply(f"{where}: {name} must be a finite number, got {value!r}")
    return float(value)


def parse_priors(data: Any, keys: list[str], source: str) -> PriorTable:
    """The priors in the record_priors call's input, or :class:`MalformedReply` saying what is wrong."""
    if not isinstance(data, dict) or not isinstance(data.get("priors"), list) or not data["priors"]:
        raise MalformedReply(f"{TOOL_NAME} input must be an object with a non-empty 'priors' list")
    known, priors = set(keys), {}
    for i, item in enumerate(data["priors"]):
        where = f"priors[{i}]"
        if not isinstance(item, dict):
            raise MalformedReply(f"{where} must be an object")
        key = item.get("key")
        if key not in known:
            raise MalformedReply(f"{where}: unknown key {key!r}")
        if key in priors:
            raise MalformedReply(f"{where}: duplicate key {key!r}")
        values = {n: _number(item, n, where) for n in ("time_log_mean", "time_log_sd", "mem_log_mean", "mem_log_sd")}
        for n in ("time_log_mean", "mem_log_mean"):
            if abs(values[n]) > MAX_ABS_LOG:
                raise MalformedReply(f"{where}: {n}={values[n]} is beyond ±{MAX_ABS_LOG:.2f} (a 50x change)")
        for n in ("time_log_sd", "mem_log_sd"):
            if not 0 < values[n] <= MAX_SD:
                raise MalformedReply(f"{where}: {n}={values[n]} must be in (0, {MAX_SD}]")
        startup = _number(item, "startup_s", where) if "startup_s" in item else 0.0
        if not 0 <= startup <= MAX_STARTUP_S:
            raise MalformedReply(f"{where}: startup_s={startup} must be in [0, {MAX_STARTUP_S}]")
        rationale = item.get("rationale")
        if not isinstance(rationale, str):
            raise MalformedReply(f"{where}: rationale must be a string")
        priors[key] = Prior(key=key, time_log_mean=values["time_log_mean"], time_log_sd=values["time_log_sd"],
                            mem_log_mean=values["mem_log_mean"], mem_log_sd=values["mem_log_sd"], startup_s=startup,
                            source=f"{source}: {rationale.strip()}")
    return PriorTable(priors)


class AnthropicPriors:
    """Priors from the configured Anthropic model, the built-in table beneath them."""

    def __init__(self, config: LLMConfig):
        self.config = config
        self.name = f"anthropic:{config.model}"

    def _error(self, context: PriorContext, reason: str, message: str) -> PriorResult:
        return PriorResult(status=PriorStatus.ERROR, table=builtin_table(context), provider="builtin",
                           reason=reason, message=f"{self.name}: {message}; using the built-in priors")

    def priors(self, context: PriorContext) -> PriorResult:
        if not self.config.configured:
            return self._error(context, "not_configured", "no API key configured")
        keys = context.keys()
        reply = call_tool(self.config, tool_definition(keys), prompt(context, keys),
                          lambda data: parse_priors(data, keys, self.name), system=SYSTEM)
        if not reply.ok or reply.value is None:  # an ok reply holds its parsed table
            return self._error(context, reply.reason, reply.message)
        table = reply.value
        return PriorResult(status=PriorStatus.OK, table=builtin_table(context).merged(table), provider=self.name)

