"""Setting keys are written and read back by one pair of functions; batch geometry by one module."""

from __future__ import annotations

import pytest

from infrarsi import batch
from infrarsi.settings import Setting, patch_key, setting_key


@pytest.mark.parametrize("name, value, key", [
    ("micro_batch_size", 8, "micro_batch_size=8"), ("compile", True, "compile=True"),
    ("dtype", "bfloat16", "dtype=bfloat16"), ("lr_schedule", "a=b", "lr_schedule=a=b"),
])
def test_a_knob_setting_round_trips_through_its_key(name, value, key):
    assert setting_key(name, value) == key
    parsed = Setting.parse(key)
    assert parsed == Setting.knob(name, value) and not parsed.patch
    assert (parsed.name, parsed.value, parsed.dim) == (name, str(value), name)


def test_a_patch_setting_round_trips_and_is_its_own_dimension():
    parsed = Setting.parse(patch_key("sdpa_attention"))
    assert parsed.patch and parsed.name == "sdpa_attention" and parsed.value == ""
    assert parsed.key == parsed.dim == "patch:sdpa_attention"


@pytest.mark.parametrize("key", ["threads", "=2", ""])
def test_a_key_that_names_no_setting_is_refused(key):
    with pytest.raises(ValueError, match="not a setting key"):
        Setting.parse(key)


def test_micro_times_accumulation_times_ranks_is_the_global_batch():
    assert batch.global_batch(4, 2, 2) == 16
    assert batch.accumulation(16, 4, ranks=2) == 2 and batch.accumulation(16, 4) == 4
    assert batch.keeps(16, 4, 2, 2) and not batch.keeps(16, 4, 2, 1)
    assert batch.divides(16, 4, 2) and not batch.divides(16, 3)
    assert batch.per_rank(16, 2) == 8
