"""A table drawn from the search tests' known surface (infrarsi.search.synthetic), not measured.

7,680 configurations of the dense fixture's full knob space with invented patches: it shows how
the methods search a large space, which the measured tables (40 configurations) cannot. Its
numbers describe the search on an invented surface, never this machine; reports label it so.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.tuners.table import Table
from infrarsi.contract import contract_path, save_contract
from infrarsi.hardware import fingerprint
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import (
    DENSE_MEM,
    DENSE_PATCHES,
    DENSE_STARTUP,
    DENSE_TIME,
    Surface,
    contract_with,
    dense_knobs,
)


def surface_table(seed: int = 0, repeats: int = 2) -> Table:
    contract = contract_with(dense_knobs())
    with tempfile.TemporaryDirectory() as tmp:
        save_contract(contract, Path(tmp))
        toml = contract_path(Path(tmp)).read_text()
    space = SearchSpace.from_contract(contract, DENSE_PATCHES)
    surface = Surface(space, DENSE_TIME, DENSE_MEM, base_peak=0.45 * space.budget_bytes,
                      startup_effects=DENSE_STARTUP, seed=seed)
    rows = []
    for cand in space.all_candidates():
        runs = []
        for _ in range(repeats):
            r = surface.run(cand)
            runs.append({"status": r.status.value, "step_times": r.step_times, "warmup_times": [],
                         "startup_s": r.startup_s, "wall_s": r.wall_s, "peak_bytes": r.peak_bytes, "detail": ""})
        rows.append({"candidate": cand.to_dict(), "short": False, "runs": runs})
    return Table({"fixture": "synthetic_dense", "hardware": fingerprint().to_dict(), "patches": DENSE_PATCHES,
                  "contract_toml": toml, "timeout_s": 180.0, "rows": rows})
