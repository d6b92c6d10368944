"""The simulated verification bench runs the product's rule: it promotes no null candidate and a
clear gain nearly always, in the fewest rounds when the search measured the gain."""

from __future__ import annotations

import random

from bench.verification_sim import verification


def test_a_null_candidate_is_never_promoted_and_a_clear_gain_is_in_the_least_rounds():
    rng = random.Random(3)
    null = [verification(rng, 1.0, 0.02, 0.0, plan_for_search=True) for _ in range(20)]
    clear = [verification(rng, 1.4, 0.02, 0.0, plan_for_search=True) for _ in range(20)]
    assert not any(o.promoted for o in null)
    assert sum(o.promoted for o in clear) >= 18
    assert all(o.rounds == 2 and o.launches == 8 for o in clear if o.promoted)
