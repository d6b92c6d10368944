"""What the layout knobs do to the state together, beyond each one's own effect.

Under ZeRO the state a GPU keeps depends on the data-parallel degree the tensor and pipeline
degrees leave (``infrarsi.priors.memory_parts.state_ratio``): at stage 3 the state is spread over
every GPU whatever the layout, so tp 8 -> 2 costs it nothing, while at stage 0 it costs four times
the state. A model log-additive in the settings cannot hold that; the memory model adds these known
offsets to each candidate's state part (``MemoryModel``), the fitted weights staying each setting's
own effect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from infrarsi.contract import Contract
from infrarsi.priors.memory_parts import state_interaction
from infrarsi.search.layout_table import LayoutTable, layout_table
from infrarsi.search.space import SearchSpace

if TYPE_CHECKING:  # importing it imports torch
    from infrarsi.records.hardware import HardwareFingerprint


def state_interactions(space: SearchSpace, hw: HardwareFingerprint, contract: Contract) -> LayoutTable | None:
    """The offsets for ``space`` on ``hw``; None where the layout's effects add up (no sharding
    knob, fewer than two layout knobs, or a CPU)."""
    table = layout_table(space, lambda values: state_interaction(values, hw, contract), min_knobs=2)
    return table if table is not None and np.abs(table.table).max() > 1e-12 else None
