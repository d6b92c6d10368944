import math

import pytest

from infrarsi.priors import Prior, PriorTable, neutral_prior, patch_key, setting_key
from infrarsi.priors.types import NEUTRAL_MEM_SD, NEUTRAL_TIME_SD


def prior(key="batch_size=4", **kw) -> Prior:
    fields = dict(time_log_mean=0.1, time_log_sd=0.1, mem_log_mean=-0.2, mem_log_sd=0.1, source="test")
    return Prior(key=key, **{**fields, **kw})


@pytest.mark.parametrize("field,value", [
    ("time_log_sd", 0.0), ("mem_log_sd", -0.1), ("time_log_mean", math.nan), ("mem_log_mean", math.inf),
    ("time_log_mean", 5.0), ("time_log_sd", 10.0), ("startup_s", -1.0),
])
def test_prior_rejects_values_no_model_can_use(field, value):
    with pytest.raises(ValueError, match=field):
        prior(**{field: value})


def test_unknown_keys_get_a_neutral_wide_prior():
    table = PriorTable.of([prior()])
    assert table.get("batch_size=4").time_log_mean == 0.1
    unknown = table.get("dtype=int8")
    assert "dtype=int8" not in table and "batch_size=4" in table
    assert (unknown.key, unknown.time_log_mean, unknown.time_log_sd) == ("dtype=int8", 0.0, NEUTRAL_TIME_SD)


def test_merged_lets_the_other_table_win_and_keeps_the_rest():
    base = PriorTable.of([prior(), prior("compile=True")])
    over = PriorTable.of([prior(time_log_mean=-0.5, source="llm")])
    merged = base.merged(over)
    assert merged.get("batch_size=4").source == "llm" and "compile=True" in merged and len(merged) == 2


def test_a_table_entry_must_hold_its_own_key():
    with pytest.raises(ValueError, match="holds the prior"):
        PriorTable({"a=1": prior("b=2")})


def test_round_trip_through_dict():
    table = PriorTable.of([prior(startup_s=40.0), neutral_prior(patch_key("x"))])
    assert PriorTable.from_dict(table.to_dict()) == table


def test_keys_are_spelled_as_the_search_space_spells_them():
    assert setting_key("compile", True) == "compile=True"
    assert setting_key("batch_size", 4) == "batch_size=4"
    assert patch_key("sdpa_attention") == "patch:sdpa_attention"


def test_context_keys_cover_tunable_domains_defaults_and_patches(make_context):
    keys = make_context("cpu").keys()
    assert "batch_size=16" in keys and "checkpointing=True" in keys and "patch:sdpa_attention" in keys
    assert not any(k.startswith("seed=") for k in keys)  # a workload knob is an invariant, not a setting


def test_merged_keeps_a_quantity_the_other_table_knows_nothing_about():
    base = PriorTable.of([prior("compile=True", mem_log_mean=0.3, mem_log_sd=0.2, startup_s=40.0)])
    # A bank that measured step times only: its memory belief is neutral, its start-up unknown.
    bank = PriorTable.of([prior("compile=True", time_log_mean=-0.1, time_log_sd=0.05, mem_log_mean=0.0,
                                mem_log_sd=NEUTRAL_MEM_SD, source="bank")])
    merged = base.merged(bank).get("compile=True")
    assert (merged.time_log_mean, merged.time_log_sd) == (-0.1, 0.05)
    assert (merged.mem_log_mean, merged.mem_log_sd, merged.startup_s) == (0.3, 0.2, 40.0)
    assert merged.source.startswith("bank; otherwise")
