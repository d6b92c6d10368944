"""A knob as a script declares it, before the catalog gives it a role: what every reader of
declarations (``discover``, ``cli_libraries``, ``literals``, ``frameworks``) returns, below them all."""

from __future__ import annotations

from dataclasses import dataclass

from infrarsi.contract import KnobValue

TYPES = {"int": "int", "float": "float", "str": "str", "bool": "bool"}
"""A knob type by the name a declaration spells it with."""


@dataclass(frozen=True, slots=True)
class RawKnob:
    """A knob as the script declares it, before the catalog gives it a role."""

    name: str
    type: str
    default: KnobValue | None
    choices: tuple[KnobValue, ...] = ()
    help: str = ""
    flag: str = ""
    flag_style: str = "eq"
    source: str = ""
    """``file:line`` of the declaration."""
    note: str = ""
    """Why it cannot be used as a knob (non-empty: skipped)."""
    receiver: str = ""
    """``file:function`` whose parameter of the knob's name receives its value (a click, typer or fire
    command), where the data flow starts; empty: the value is loaded as ``<anything>.<name>``."""
