"""The time and parameter cross-checks, on numbers shaped like real trials'."""

import pytest

from infrarsi.noise import LOSS_SAFETY
from infrarsi.runner.accounting import (
    checksum_drift,
    checksum_problem,
    checksum_tolerance,
    drift_at,
    startup_problem,
    time_problem,
)


def test_a_run_whose_time_adds_up_passes():
    assert time_problem(6.3, 5.0, [0.25] * 5) is None


def test_work_after_the_last_step_is_unaccounted():
    problem = time_problem(12.0, 5.0, [0.05] * 5)
    assert problem and "unaccounted work" in problem and "6.75 s after the last step" in problem


def test_steps_longer_than_the_run_are_not_infrarsis():
    assert "not InfraRSI's" in time_problem(3.0, 2.5, [0.5] * 5)


def test_startup_within_noise_passes_and_a_grown_one_fails():
    base = [4.1, 4.4, 4.0]
    assert startup_problem(base, [4.5, 4.3, 4.6]) is None
    problem = startup_problem(base, [9.2, 9.0, 9.5])
    assert problem and "work done before the first step" in problem
    # a declared one-off cost (compilation) is allowed; None: any
    assert startup_problem(base, [9.2, 9.0, 9.5], declared_s=6.0) is None
    assert startup_problem(base, [60.0, 61.0, 59.0], declared_s=None) is None


def test_checksum_identical_passes_and_exact_losses_demand_it():
    ref = [12.5, 840.25]
    assert checksum_problem(list(ref), ref, rtol=1e-5, exact_losses=True) is None
    # printed the reference losses but trained nothing: the parameters are the initial ones
    problem = checksum_problem([11.9, 812.0], ref, rtol=1e-5, exact_losses=True)
    assert problem and "match the reference exactly but" in problem


def test_checksum_within_the_tolerance_derived_from_the_loss_tolerance():
    rtol = checksum_tolerance(1e-4, [5.0, 4.9, 4.8, 4.7, 4.6])
    assert rtol == pytest.approx(1e-4 / 4.8)
    ref = [12.5, 840.25]
    assert checksum_problem([12.5001, 840.26], ref, rtol=rtol, exact_losses=False) is None
    assert checksum_problem([12.5, 845.0], ref, rtol=rtol, exact_losses=False) is not None
    assert checksum_problem([float("nan"), 1.0], ref, rtol=rtol, exact_losses=False) is not None
    assert checksum_problem(None, ref, rtol=rtol, exact_losses=False) is None


def test_a_long_run_is_allowed_the_drift_a_reorder_only_run_showed_at_its_length():
    ref, reordered = [12.5, 840.25], [12.5, 840.6]  # a reorder-only run's parameters after 32 steps
    drift = checksum_drift(reordered, ref)
    assert drift == pytest.approx(0.35 / (2 * 840.25))
    from_loss = checksum_tolerance(1e-4, [5.0, 4.9, 4.8, 4.7, 4.6])
    assert from_loss < drift  # the first steps' losses alone would call that run another model
    assert checksum_problem(reordered, ref, rtol=from_loss, exact_losses=False) is not None
    at_32 = checksum_tolerance(1e-4, [5.0, 4.9, 4.8, 4.7, 4.6], drift_at({32: drift}, 32))
    assert at_32 == pytest.approx(LOSS_SAFETY * drift)
    assert checksum_problem(reordered, ref, rtol=at_32, exact_losses=False) is None
    # Ten times that drift is beyond it; a shorter run is allowed proportionally less.
    assert checksum_problem([12.5, 840.25 + 10 * 0.35 * 1.01], ref, rtol=at_32, exact_losses=False) is not None
    assert drift_at({32: drift}, 16) == pytest.approx(drift / 2) and drift_at({}, 16) == 0.0
