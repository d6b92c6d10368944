"""The memory model's P(fits) against the enumeration of a simulated cluster."""

from __future__ import annotations

from bench.sim.backend import SimTable
from bench.sim.calibration import BANDS, calibration, table_rows
from bench.sim.space import SPACES


def test_every_configuration_read_falls_in_one_band_and_the_surest_fit():
    table = SimTable(SPACES["7b-8xh100"])
    counts = calibration(table, seeds=1, at=[4, 8], trials=8)
    assert len(counts) == len(BANDS)
    assert all(0 <= fit <= n for n, fit in counts)
    # Bands start at 0.3: every configuration read twice, less those the model calls unlikely.
    assert 0 < sum(n for n, _ in counts) <= 2 * table.space.size()
    surest, fit = counts[-1]
    assert surest and fit / surest > 0.95
    assert table_rows("7b", counts).count("|") == len(BANDS) + 2
