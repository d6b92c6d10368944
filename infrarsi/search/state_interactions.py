"""What the layout knobs do to the state together, beyond each one's own effect.

Under ZeRO the state a GPU keeps depends on the data-parallel degree the tensor and pipeline
degrees leave (``infrarsi.priors.memory_parts.state_ratio``): at stage 3 the state is spread over
every GPU whatever the layout, so tp 8 -> 2 costs it nothing, while at stage 0 it costs four times
the state. A model log-additive in the settings cannot hold that; the memory model adds these known
offsets to each candidate's state part (``MemoryModel``), the fitted weights staying each setting's
own effect.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from infrarsi.contract import Contract
from infrarsi.priors.memory_parts import LAYOUT_ROLES, state_interaction
from infrarsi.search.space import SearchSpace
from infrarsi.settings import setting_key

if TYPE_CHECKING:  # importing it imports torch
    from infrarsi.records.hardware import HardwareFingerprint

MAX_COMBINATIONS = 4096
"""Layouts tabulated at most (a cluster's spaces hold a few hundred)."""


@dataclass(frozen=True, slots=True)
class StateInteractions:
    """The log offset of the state part for every combination of the layout knobs' values."""

    codes: np.ndarray
    """(settings, layout knobs): the index of the value a setting gives its knob (0: the baseline's)."""
    strides: np.ndarray
    table: np.ndarray

    def offsets(self, indicator: np.ndarray) -> np.ndarray:
        """The offset of each candidate, from its rows of setting indicators."""
        index = np.rint(indicator @ self.codes @ self.strides).astype(int)
        return self.table[index]


def state_interactions(space: SearchSpace, hw: HardwareFingerprint, contract: Contract) -> StateInteractions | None:
    """The offsets for ``space`` on ``hw``; None where the layout's effects add up (no sharding
    knob, fewer than two layout knobs, or a CPU)."""
    knobs = [k for role in LAYOUT_ROLES if (k := next((k for k in space.knobs if k.role == role), None)) is not None]
    if len(knobs) < 2:
        return None
    values = [[k.default, *(v for v in k.domain if v != k.default)] for k in knobs]
    sizes = [len(v) for v in values]
    if np.prod(sizes) > MAX_COMBINATIONS:
        return None
    codes = np.zeros((len(space.setting_keys), len(knobs)))
    for j, (knob, domain) in enumerate(zip(knobs, values)):
        for i, value in enumerate(domain[1:], start=1):
            key = setting_key(knob.name, value)
            if key not in space.setting_keys:
                return None  # a knob of a coupled group or a derived one: not one setting per value
            codes[space.setting_keys.index(key), j] = i
    table = np.array([state_interaction({k.role: v for k, v in zip(knobs, combo)}, hw, contract)
                      for combo in itertools.product(*values)])
    if not np.abs(table).max() > 1e-12:
        return None
    strides = np.array([int(np.prod(sizes[j + 1:])) for j in range(len(sizes))], dtype=float)
    return StateInteractions(codes, strides, table)
