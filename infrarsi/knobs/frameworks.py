"""Settings of training frameworks that the job's code does not declare (Hugging Face
``TrainingArguments``, Lightning's ``Trainer`` through ``LightningCLI``), from the schema in
``data/frameworks.toml``: which are present, their flags and defaults, and their roles.

A job uses a framework's settings when its code hands one of the schema's ``detect`` classes to the
framework's parser (``HfArgumentParser((ModelArguments, TrainingArguments))``). Each setting becomes
a knob with the framework's flag and default (the owner's command then sets the baseline), and its
role comes from the schema, not from its name or the data flow (the framework's code is not the job's).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import libcst as cst

from infrarsi.knobs.catalog import Rule
from infrarsi.knobs.raw import RawKnob
from infrarsi.knobs.source import ParsedFile, dotted, walk

SCHEMA = Path(__file__).with_name("data") / "frameworks.toml"


@dataclass(frozen=True, slots=True)
class FrameworkSetting:
    """A training framework's setting the code uses (frameworks.toml), as a knob with its role; not
    :class:`infrarsi.settings.Setting`, the `knob=value` key."""
    framework: str
    name: str
    flag: str
    rule: Rule
    knob: RawKnob


@cache
def _schema() -> dict:
    return tomllib.loads(SCHEMA.read_text())


def _uses(readers: list[ParsedFile], parser: str, detect: list[str]) -> bool:
    for r in readers:
        for node in walk(r.module):
            if isinstance(node, cst.Call) and dotted(node.func).rsplit(".", 1)[-1] == parser:
                names = {dotted(n) .rsplit(".", 1)[-1] for n in walk(node) if isinstance(n, (cst.Name, cst.Attribute))}
                if names & set(detect):
                    return True
    return False


def framework_settings(readers: list[ParsedFile]) -> list[FrameworkSetting]:
    """The schema settings of every framework the job's code hands to its parser."""
    out = []
    for framework, spec in _schema().items():
        if not _uses(readers, spec["parser"], spec["detect"]):
            continue
        for name, s in spec["settings"].items():
            flag = spec["flag_prefix"] + name
            knob = RawKnob(name, s["type"], s["default"], tuple(s.get("choices", ())), help=f"{framework} setting",
                           flag=flag, source=f"{framework} schema")
            out.append(FrameworkSetting(framework, name, flag, Rule(s["role"], "", s.get("aspect", "")), knob))
    return out


def with_settings(knobs: list[RawKnob], settings: list[FrameworkSetting]) -> list[RawKnob]:
    """``knobs`` plus the framework settings not among them (matched by flag or name)."""
    have = {k.name for k in knobs} | {k.flag.replace("-", "_") for k in knobs if k.flag}
    return [*knobs, *(s.knob for s in settings if s.name not in have and s.flag.replace("-", "_") not in have)]
