"""Common random numbers: a replayed trial's noise depends on its run's seed, its candidate and its
repeat, not on what ran before it, so arms compared seed by seed differ only by what they choose."""

from __future__ import annotations

import pytest

from bench.sim.backend import SimTable
from bench.sim.space import SPACES
from bench.tuners.common_noise import CommonNoise


@pytest.fixture(scope="module")
def table() -> SimTable:
    return SimTable(SPACES["7b-8xh100"])


def _steps(table: SimTable, noise: CommonNoise, cand) -> list[float]:
    return table.trial(cand, noise(cand), None).step_times


def test_a_trial_draws_the_same_noise_whatever_ran_before_it(table):
    a, b, c = [cand for cand in table.space.all_candidates() if table.result(cand).ok][:3]
    plain, after_extra = CommonNoise(7, 0), CommonNoise(7, 0)
    first = [_steps(table, plain, a), _steps(table, plain, b)]
    _steps(table, after_extra, c)  # the arm that ran one trial more first (a bank's seed)
    assert [_steps(table, after_extra, a), _steps(table, after_extra, b)] == first


def test_every_repeat_seed_and_stream_draws_afresh(table):
    cand = table.space.baseline()
    noise = CommonNoise(7, 0)
    once, again = _steps(table, noise, cand), _steps(table, noise, cand)
    assert once != again
    assert _steps(table, CommonNoise(8, 0), cand) != once
    assert _steps(table, CommonNoise(7, 1), cand) != once
