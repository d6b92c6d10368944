"""What the trials measured, read for verification: the fastest measured candidate is verified
beside the model's choice only when the two measured apart beyond doctor's noise floor."""

from __future__ import annotations

from infrarsi.search.history import believable_gain, unmatched_fastest
from infrarsi.search.synthetic import result
from infrarsi.trials import Candidate

BASE = Candidate(knobs={"micro_batch_size": 4})
MB8 = Candidate(knobs={"micro_batch_size": 8})
MB16 = Candidate(knobs={"micro_batch_size": 16})
UNTRIED = Candidate(knobs={"micro_batch_size": 32})
FLOOR = 1.07


def test_two_measured_within_the_floor_are_one_answer_verified_once():
    history = [result(BASE, step=0.20), result(MB8, step=0.150), result(MB16, step=0.148)]
    assert unmatched_fastest(history, [MB8], BASE, 200, FLOOR) == []


def test_the_fastest_is_verified_when_the_choice_measured_slower_beyond_the_floor_or_never_ran():
    history = [result(BASE, step=0.20), result(MB8, step=0.170), result(MB16, step=0.140)]
    assert unmatched_fastest(history, [MB8], BASE, 200, FLOOR) == [MB16]
    assert unmatched_fastest(history, [UNTRIED], BASE, 200, FLOOR) == [MB16]
    assert unmatched_fastest(history, [MB16], BASE, 200, FLOOR) == []


def test_nothing_measured_beyond_the_floor_adds_nothing():
    history = [result(BASE, step=0.20), result(MB8, step=0.195)]
    assert unmatched_fastest(history, [UNTRIED], BASE, 200, FLOOR) == []


def test_the_gain_verification_plans_for_is_the_least_measured_over_the_noise_floor():
    """The search's trials plan verification's rounds, discounted by doctor's floor (what one run
    can show by chance); a candidate never measured leaves it unknown."""
    history = [result(BASE, step=0.20), result(MB8, step=0.160), result(MB16, step=0.125)]
    assert believable_gain(history, [MB16], BASE, 200, FLOOR) > believable_gain(history, [MB8, MB16], BASE, 200, FLOOR)
    assert 1.0 < believable_gain(history, [MB8], BASE, 200, FLOOR) < 0.20 / 0.160
    assert believable_gain(history, [MB8, UNTRIED], BASE, 200, FLOOR) is None
