"""Mixed precision (infrarsi/patches/autocast_bf16.py): tried only where bfloat16 matmuls are
faster, and then validated by a real trial on the numerics tolerance."""

import pytest

from infrarsi.contract import load_contract
from infrarsi.hardware import CPU_DTYPE_UNITS, cpu_flags, peak_flops
from infrarsi.patches import REGISTRY, applicable
from infrarsi.patches.autocast_bf16 import MIN_GAIN, refusal
from infrarsi.patches.numerics import numerics_by_design
from infrarsi.project import editable_sources
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus


def test_a_cpu_without_bf16_units_is_refused_by_name():
    why = refusal({"avx2", "fma"}, None, None)
    assert why and "amx_bf16 or avx512_bf16 absent" in why and "slower than float32" in why


def test_bf16_that_measures_no_faster_is_refused_with_both_rates():
    why = refusal({"avx512_bf16"}, 300e9, 290e9)
    assert why and "300 GFLOP/s" in why and "290 in float32" in why and f"not {MIN_GAIN}x faster" in why
    assert refusal({"amx_bf16"}, 2032e9, 293e9) is None


@pytest.mark.e2e
def test_proposed_and_validated_where_bf16_is_fast_else_refused_with_the_reason(vision_job):
    """On this machine, whichever it is: a CPU whose bf16 matmuls measure MIN_GAIN times float32's
    tries the patch, and its trial keeps the loss within the numerics tolerance; any other is told
    why it is not tried."""
    repo = vision_job
    contract = load_contract(repo)
    fast = bool(cpu_flags() & set(CPU_DTYPE_UNITS["bf16"])) and \
        peak_flops("cpu", "bf16").value >= MIN_GAIN * peak_flops("cpu", "fp32").value
    tried, refused = applicable(editable_sources(repo, contract), contract, "cpu")
    if not fast:
        assert "autocast_bf16" not in tried and refused["autocast_bf16"] == REGISTRY["autocast_bf16"].refusal("cpu", {})
        return
    assert "autocast_bf16" in tried and "autocast_bf16" not in refused
    candidate = Candidate(knobs={}, patches=("autocast_bf16",))
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=candidate,
                                 numerics_by_design=numerics_by_design(candidate)))
    assert result.status is TrialStatus.OK, result.detail
    assert any("torch.autocast" in h.text for h in result.hunks)
