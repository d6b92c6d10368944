"""Understanding the user's goal: "faster", "fit in 12 GiB", "at most 30 trials", "don't touch data.py".

The common forms are parsed here without an LLM. When an Anthropic key is configured, a goal
these rules cannot read is sent to the model, which answers through a tool with the same fields;
its answer is validated like any other input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from infrarsi.byte_units import GIB, KIB, MIB, TIB
from infrarsi.llm import LLMConfig, call_tool

if TYPE_CHECKING:
    from anthropic.types import ToolParam

EXAMPLES = (
    '"faster"',
    '"faster, fit in 12 GiB"',
    '"at most 30 trials"',
    '"faster in 20 minutes"',
    '"don\'t touch data.py"',
)

_UNITS = {"b": 1, "kb": 1e3, "kib": KIB, "mb": 1e6, "mib": MIB, "gb": 1e9, "gib": GIB, "tb": 1e12, "tib": TIB}
_MEMORY = re.compile(
    r"(?:fit(?:s)?\s+(?:in(?:to)?|within|under)|within|under|below|at most|max(?:imum)?|budget(?: of)?|memory)\s*"
    r"(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[kmgt]i?b)\b", re.I)
_TRIALS = re.compile(r"(?:(?:at most|up to|max(?:imum)?|in|within|budget of)\s+)?(?P<n>\d+)\s+trials?\b", re.I)
_MINUTES = re.compile(r"(?:(?:at most|up to|in|within|under)\s+)?(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>minutes?|mins?|m|hours?|h)\b", re.I)
_EXCLUDE = re.compile(
    r"(?:don'?t|do not|never)\s+(?:touch|change|edit|modify|patch)\s+(?P<paths>[\w./\\-]+(?:\s*(?:,|and)\s*[\w./\\-]+)*)"
    r"|leave\s+(?P<paths2>[\w./\\-]+(?:\s*(?:,|and)\s*[\w./\\-]+)*)\s+alone", re.I)
_FASTER = re.compile(r"\b(faster|speed(?:\s*up)?|quicker|throughput|tokens/s|step time|optimi[sz]e|fast)\b", re.I)
_FILLER = re.compile(r"\b(make|it|the|job|training|please|and|but|with|keep|same|model|fits?|memory|"
                     r"while|runs?|run|train|this|in|a|at|most|budget|of|to|be|more|much|as|possible)\b", re.I)


class GoalError(ValueError):
    """A goal none of the rules (nor the LLM, when configured) could read."""

    def __init__(self, goal: str, why: str = ""):
        hint = "; ".join(EXAMPLES)
        super().__init__(f"could not understand the goal {goal!r}{': ' + why if why else ''}. Try one of: {hint}")


@dataclass(kw_only=True, slots=True)
class Goal:
    text: str
    budget_bytes: int | None = None
    trials: int | None = None
    minutes: float | None = None
    exclude: list[str] = field(default_factory=list)
    """Paths the user does not want touched: taken out of the editable scope."""
    understood_by: str = "rules"


def _paths(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\s*(?:,|\band\b)\s*", text) if p.strip()]


def parse_rules(text: str) -> Goal | None:
    """The goal by the built-in rules, or None when some of it is left unexplained."""
    goal = Goal(text=text)
    rest = text
    for pattern, apply in (
        (_MEMORY, lambda m: setattr(goal, "budget_bytes", int(float(m["n"]) * _UNITS[m["unit"].lower()]))),
        (_TRIALS, lambda m: setattr(goal, "trials", int(m["n"]))),
        (_MINUTES, lambda m: setattr(goal, "minutes", float(m["n"]) * (60 if m["unit"].lower().startswith("h") else 1))),
        (_EXCLUDE, lambda m: goal.exclude.extend(_paths(m["paths"] or m["paths2"]))),
    ):
        for match in pattern.finditer(rest):
            apply(match)
        rest = pattern.sub(" ", rest)
    said_faster = bool(_FASTER.search(rest))
    rest = re.sub(r"[,;:!]|\.(?=\s|$)", " ", rest)
    rest = _FILLER.sub(" ", _FASTER.sub(" ", rest))
    if rest.strip():
        return None
    if not (said_faster or goal.budget_bytes or goal.trials or goal.minutes or goal.exclude):
        return None
    return goal


_TOOL: ToolParam = {
    "name": "set_goal",
    "description": "The user's optimization goal for a PyTorch training job, as structured fields.",
    "input_schema": {
        "type": "object",
        "properties": {
            "understood": {"type": "boolean", "description": "false if the text is not a goal about making training faster"},
            "memory_budget_gib": {"type": ["number", "null"]},
            "max_trials": {"type": ["integer", "null"]},
            "max_minutes": {"type": ["number", "null"]},
            "exclude_paths": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["understood"],
    },
}


def parse_with_llm(text: str, config: LLMConfig) -> Goal:
    """Ask the configured model; its answer is checked field by field."""
    reply = call_tool(config, _TOOL, f"Read this goal for tuning a training job and fill set_goal: {text!r}",
                      lambda data: data, max_tokens=512)
    if not reply.ok and not reply.replied:  # the model is optional: a failed call reads as "not understood"
        raise GoalError(text, f"the rules could not read it and the model call failed ({reply.reason}: {reply.message})")
    data = reply.value
    if not isinstance(data, dict) or data.get("understood") is not True:
        raise GoalError(text, "the model did not read it as a goal")
    goal = Goal(text=text, understood_by=f"anthropic:{config.model}")
    gib = data.get("memory_budget_gib")
    if gib is not None:
        if not isinstance(gib, (int, float)) or not gib > 0:
            raise GoalError(text, f"the model answered an invalid memory budget {gib!r}")
        goal.budget_bytes = int(gib * GIB)
    trials, minutes = data.get("max_trials"), data.get("max_minutes")
    if trials is not None and (not isinstance(trials, int) or trials <= 0):
        raise GoalError(text, f"the model answered an invalid trial count {trials!r}")
    if minutes is not None and (not isinstance(minutes, (int, float)) or minutes <= 0):
        raise GoalError(text, f"the model answered an invalid time budget {minutes!r}")
    goal.trials, goal.minutes = trials, minutes
    paths = data.get("exclude_paths") or []
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise GoalError(text, "the model answered invalid paths")
    goal.exclude = paths
    return goal


def parse_goal(text: str, config: LLMConfig | None = None) -> Goal:
    """Rules first; the LLM only for what they cannot read, and only when a key is configured."""
    goal = parse_rules(text.strip())
    if goal is not None:
        return goal
    if config is not None and config.configured:
        return parse_with_llm(text, config)
    raise GoalError(text)
