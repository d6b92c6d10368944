"""Common random numbers: each replayed trial's noise drawn from its run's seed, its candidate and
how many times the run has measured that candidate before.

Arms compared seed by seed (a bank against none) must differ by what they choose, not by the noise:
drawn from one sequential stream, a single extra trial early in one arm (the bank's seed) shifts
every later draw, and two runs of the very same search then differ by up to 5 trials to 95 % of the
optimum (docs/benchmarks.md, "Common random numbers for the arms compared seed by seed"). Keyed by
the candidate, the same trial in both arms sees the same noise whatever ran before it; within a run
every trial still draws afresh.
"""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np

from infrarsi.trials import Candidate


class CommonNoise:
    def __init__(self, seed: int, stream: int):
        self.seed, self.stream = seed, stream
        self._runs: Counter[str] = Counter()

    def __call__(self, candidate: Candidate) -> np.random.Generator:
        """The generator for the next trial of ``candidate``."""
        key = candidate.key()
        digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
        rng = np.random.default_rng([self.seed, self.stream, digest, self._runs[key]])
        self._runs[key] += 1
        return rng
