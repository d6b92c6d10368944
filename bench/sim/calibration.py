"""How often a candidate fits at the P(fits) InfraRSI's memory model gives it, on the simulated clusters.

    .venv/bin/python -m bench.sim.calibration --seeds 8 --at 6,10,14     # every space, ~3 min

For each seed, one InfraRSI campaign run (``bench.sim.campaign.campaign``); after the first ``--at``
trials of it, the run's own memory model (the sampler's, with its priors and the layout's state
interactions) gives every valid configuration a P(fits), and the enumeration says whether it fits.
Printed per space and band of P(fits): how many configurations fell in it and the share that fit.
A calibrated model fits about as often as it says; the gate expected improvement applies after an
OOM (``infrarsi_sampler.EI_P_FITS``) is read against this table.
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.sim.backend import SimTable
from bench.sim.campaign import campaign, make_strategy
from bench.sim.space import SPACES

BANDS = ((0.3, 0.5), (0.5, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 0.97), (0.97, 1.01))


def calibration(table: SimTable, seeds: int, at: list[int], trials: int = 20) -> list[tuple[int, int]]:
    """Per band of ``BANDS``: (configurations the model put there, of them those that fit)."""
    space, pool = table.space, table.space.enumerated()
    fits = np.array([table.result(c).peak_bytes <= space.budget_bytes for c in pool.candidates])
    counts = np.zeros((len(BANDS), 2), dtype=int)
    for seed, run in enumerate(campaign(table, "infrarsi", seeds, trials)):
        memory = make_strategy("infrarsi", table, seed).prepare(space).sampler.memory
        rng = np.random.default_rng([seed, 7])
        history = [table.trial(table.candidate(r["key"]), rng, None) for r in run]
        for n in at:
            p = memory.fit(history[:n]).p_fits(pool.features, space.budget_bytes, pool.indicator)
            for i, (low, high) in enumerate(BANDS):
                band = (p >= low) & (p < high)
                counts[i] += band.sum(), (band & fits).sum()
    return [(int(n), int(k)) for n, k in counts]


def table_rows(name: str, counts: list[tuple[int, int]]) -> str:
    cells = [f"{k / n:.1%} of {n}" if n else "—" for n, k in counts]
    return f"| {name} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--space", choices=sorted(SPACES), action="append")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--at", default="6,10,14", help="trials after which the model is read")
    args = parser.parse_args()
    at = [int(n) for n in args.at.split(",")]
    bands = [f"P(fits) {low:.2f}-{min(high, 1.0):.2f}" for low, high in BANDS]
    print("| space | " + " | ".join(bands) + " |")
    print("|---|" + "--:|" * len(bands))
    for name in args.space or list(SPACES):
        print(table_rows(name, calibration(SimTable(SPACES[name]), args.seeds, at)), flush=True)
    print(f"\n{args.seeds} runs per space, the model read after {', '.join(map(str, at))} trials; "
          "each cell: the share of the configurations in the band that fit, of how many")


if __name__ == "__main__":
    main()
