"""The early-abort rule compares like with like: each step with the baseline's step of the same index."""

from __future__ import annotations

import pytest

from infrarsi.runner import abort

# The baseline: step 1 carries a 2 s callback, step 6 an evaluation; its ordinary steps take 0.1 s.
BASELINE = [0.1, 2.1, 0.1, 0.1, 0.1, 0.1, 0.4, 0.1, 0.1, 0.1]


def test_a_step_the_baseline_also_spent_long_on_counts_as_an_ordinary_one():
    steps = [(1, 2.2), (2, 0.11), (6, 0.42)]
    assert abort.like_baseline(steps, BASELINE, warmup=3) == pytest.approx([2.2 / 21, 0.11, 0.42 / 4])
    # A much faster candidate whose callback takes as long: its step is its own 0.03 s, not 2.03 / 21.
    assert abort.like_baseline([(1, 2.03)], BASELINE, warmup=3) == pytest.approx([0.03])
    # Shorter than the baseline's extra work alone: taken as free, never a reason to abort.
    assert abort.like_baseline([(1, 1.05)], BASELINE, warmup=3) == [0.0]
    # As slow as the baseline in its periodic steps: nowhere near three times the bound.
    assert not abort.far_slower(abort.like_baseline(steps[:2], BASELINE, 3), bound=0.15)
    assert abort.far_slower([2.2, 0.11], bound=0.15)  # taken as they are, the callback would abort it
    # A step the baseline never ran, or no baseline at all, is taken as it is.
    assert abort.like_baseline([(40, 0.3)], BASELINE, 3) == [0.3]
    assert abort.like_baseline([(1, 0.3)], [], 3) == [0.3]


def test_a_candidate_slower_in_every_step_is_still_aborted():
    steps = [(i, 2.0 * t) for i, t in enumerate(BASELINE)][3:]
    assert abort.clearly_slower(abort.like_baseline(steps, BASELINE, 3), bound=0.15)


def test_periodic_steps_are_those_long_in_every_run():
    other = [0.11, 2.0, 0.1, 0.1, 0.1, 0.1, 0.45, 0.1, 0.3, 0.1]  # step 8 slow once: noise, not periodic
    assert abort.periodic_steps([BASELINE, other]) == pytest.approx({1: 1.9, 6: 0.3})
    assert abort.periodic_steps([]) == {}
