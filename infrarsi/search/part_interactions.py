"""What the layout knobs do to each part of the peak together, beyond each one's own effect.

Under ZeRO the state a GPU keeps depends on the data-parallel degree the tensor and pipeline
degrees leave (``infrarsi.priors.memory_parts.state_ratio``): at stage 3 the state is spread over
every GPU whatever the layout, so tp 8 -> 2 costs it nothing, while at stage 0 it costs four times
the state. Where the model's shape is known the activations are a known function of recomputation,
tensor and sequence parallelism and the pipeline schedule too (``activation_ratio``): sequence
parallelism splits the norms only over tp > 1 ranks. A model log-additive in the settings cannot
hold either; the memory model adds these known offsets to each candidate's parts (``MemoryModel``),
the fitted weights staying each setting's own effect, and starts the activations' share at the
baseline where the shape puts it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from infrarsi.contract import Contract, KnobValue
from infrarsi.priors.memory_parts import (
    ACTIVATION_ROLES,
    LAYOUT_ROLES,
    activation_interaction,
    baseline_activation_share,
    state_interaction,
)
from infrarsi.search.space import SearchSpace
from infrarsi.settings import setting_key

if TYPE_CHECKING:  # importing it imports torch
    from infrarsi.records.hardware import HardwareFingerprint

MAX_COMBINATIONS = 4096
"""Combinations tabulated at most (a cluster's spaces hold a few hundred)."""


@dataclass(frozen=True, slots=True)
class RoleTable:
    """A part's log offset for every combination of some knobs' values."""

    codes: np.ndarray
    """(settings, knobs): the index of the value a setting gives its knob (0: the baseline's)."""
    strides: np.ndarray
    table: np.ndarray

    def offsets(self, indicator: np.ndarray) -> np.ndarray:
        """The offset of each candidate, from its rows of setting indicators."""
        index = np.rint(indicator @ self.codes @ self.strides).astype(int)
        return self.table[index]


@dataclass(frozen=True, slots=True)
class PartInteractions:
    """The known offsets of the state and the activations parts, and the activations' share at the
    baseline the shape gives (None: the priors' implied share)."""

    state: RoleTable | None
    activations: RoleTable | None
    share: float | None

    def offsets(self, indicator: np.ndarray) -> np.ndarray:
        """(candidates, 2): each candidate's state and activations offsets."""
        zero = np.zeros(len(indicator))
        return np.column_stack([zero if t is None else t.offsets(indicator)
                                for t in (self.state, self.activations)])


def _table(space: SearchSpace, roles: tuple[str, ...],
           offset: Callable[[Mapping[str, KnobValue]], float]) -> RoleTable | None:
    """``offset`` tabulated over the combinations of ``roles``' knobs in ``space``; None where there
    are fewer than two, too many combinations, or every offset is zero."""
    knobs = [k for role in roles if (k := next((k for k in space.knobs if k.role == role), None)) is not None]
    if len(knobs) < 2:
        return None
    values = [[k.default, *(v for v in k.domain if v != k.default)] for k in knobs]
    sizes = [len(v) for v in values]
    if np.prod(sizes) > MAX_COMBINATIONS:
        return None
    codes = np.zeros((len(space.setting_keys), len(knobs)))
    for j, (knob, domain) in enumerate(zip(knobs, values, strict=True)):
        for i, value in enumerate(domain[1:], start=1):
            key = setting_key(knob.name, value)
            if key not in space.setting_keys:
                return None  # a knob of a coupled group or a derived one: not one setting per value
            codes[space.setting_keys.index(key), j] = i
    table = np.array([offset({k.role: v for k, v in zip(knobs, combo, strict=True)})
                      for combo in itertools.product(*values)])
    if not np.abs(table).max() > 1e-12:
        return None
    strides = np.array([int(np.prod(sizes[j + 1:])) for j in range(len(sizes))], dtype=float)
    return RoleTable(codes, strides, table)


def part_interactions(space: SearchSpace, hw: HardwareFingerprint, contract: Contract) -> PartInteractions | None:
    """The offsets for ``space`` on ``hw``; None where each part's effects add up and the shape is
    not known (a CPU, or no more than one layout knob)."""
    state = _table(space, LAYOUT_ROLES, lambda values: state_interaction(values, hw, contract))
    activations = _table(space, ACTIVATION_ROLES, lambda values: activation_interaction(values, hw, contract))
    share = baseline_activation_share(hw, contract)
    if state is None and activations is None and share is None:
        return None
    return PartInteractions(state, activations, share)
