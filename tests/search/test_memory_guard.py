"""Which candidates an OOM leaves as memory savers, by the fitted prices and by the believed ones."""

import numpy as np

from infrarsi.search.memory_guard import oom_savers


def test_a_saver_must_be_cheaper_by_the_belief_as_well_as_by_the_fit(dense_space):
    space = dense_space
    oomed = space.with_value(space.baseline(), "micro_batch_size", 8)
    smaller = space.with_value(space.baseline(), "micro_batch_size", 2)
    rows, oomed_rows = space.indicator([smaller]), space.indicator([oomed])
    key = {k: i for i, k in enumerate(space.setting_keys)}
    # Fitted from trials under other settings, micro-batch 2 came out cheaper than 8...
    fitted = np.zeros(len(space.setting_keys))
    fitted[key["micro_batch_size=2"]], fitted[key["micro_batch_size=8"]] = -0.5, 0.3
    assert oom_savers(space, fitted, rows, oomed_rows)[0]
    # ...as the belief has it too: a saver.
    assert oom_savers(space, fitted, rows, oomed_rows, believed=fitted)[0]
    # A belief that it costs more (here: a wrong one) keeps it from being taken as one.
    believed = -fitted
    assert not oom_savers(space, fitted, rows, oomed_rows, believed=believed)[0]
    # One hungrier by both is none.
    fitted[key["micro_batch_size=16"]] = 0.6
    hungrier = space.indicator([space.with_value(space.baseline(), "micro_batch_size", 16)])
    assert not oom_savers(space, fitted, hungrier, oomed_rows, believed=fitted)[0]
