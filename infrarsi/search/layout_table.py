"""A quantity known for every combination of a space's layout knobs, read for candidates from
their setting indicators: what the layout does to the memory's state part
(``state_interactions``) and the share of the parameters ZeRO moves each micro-batch
(``time_interactions``). A cluster's space holds a few hundred layouts, so the table is exact."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from infrarsi.contract import KnobValue
from infrarsi.priors.memory_parts import LAYOUT_ROLES
from infrarsi.search.space import SearchSpace
from infrarsi.settings import setting_key

MAX_COMBINATIONS = 4096
"""Layouts tabulated at most (a cluster's spaces hold a few hundred)."""


@dataclass(frozen=True, slots=True)
class LayoutTable:
    """A value for every combination of the layout knobs' values."""

    codes: np.ndarray
    """(settings, layout knobs): the index of the value a setting gives its knob (0: the baseline's)."""
    strides: np.ndarray
    table: np.ndarray

    def at(self, indicator: np.ndarray) -> np.ndarray:
        """The value of each candidate, from its rows of setting indicators."""
        index = np.rint(indicator @ self.codes @ self.strides).astype(int)
        return self.table[index]


def layout_table(space: SearchSpace, value: Callable[[dict[str, KnobValue]], float], *,
                 min_knobs: int = 1) -> LayoutTable | None:
    """``value`` of each combination of the values of ``space``'s layout knobs (by role, at least
    ``min_knobs`` of them); None with fewer, too many combinations, or a layout knob whose values
    are not one setting each (coupled or derived)."""
    knobs = [k for role in LAYOUT_ROLES if (k := next((k for k in space.knobs if k.role == role), None)) is not None]
    if len(knobs) < max(min_knobs, 1):
        return None
    values = [[k.default, *(v for v in k.domain if v != k.default)] for k in knobs]
    sizes = [len(v) for v in values]
    if np.prod(sizes) > MAX_COMBINATIONS:
        return None
    codes = np.zeros((len(space.setting_keys), len(knobs)))
    for j, (knob, domain) in enumerate(zip(knobs, values)):
        for i, v in enumerate(domain[1:], start=1):
            key = setting_key(knob.name, v)
            if key not in space.setting_keys:
                return None
            codes[space.setting_keys.index(key), j] = i
    table = np.array([value({k.role: v for k, v in zip(knobs, combo)}) for combo in itertools.product(*values)])
    strides = np.array([int(np.prod(sizes[j + 1:])) for j in range(len(sizes))], dtype=float)
    return LayoutTable(codes, strides, table)
