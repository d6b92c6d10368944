"""Tensor parallelism's time priced from the model's shape and the GPU's datasheet."""

from dataclasses import replace

import pytest

from infrarsi.priors import builtin_table
from infrarsi.priors.tensor_parallel import allreduce_share, split_time
from tests.priors.conftest import hardware, knob, make_contract

H100 = replace(hardware("cuda"), gpu_count=8)
A100 = replace(H100, gpu_name="NVIDIA A100-SXM4-80GB")


def _shaped(hidden: int, seq: int = 4096, heads: int = 32, knobs=None, global_batch: int = 256):
    contract = make_contract(knobs or [knob("tp", "tensor_parallel", "int", 8, [1, 2, 4, 8])])
    return replace(contract, workload=replace(contract.workload, seq_len=seq, hidden=hidden, heads=heads,
                                              global_batch=global_batch, tokens_per_step=global_batch * seq))


def test_the_all_reduces_weigh_more_for_narrow_models_on_fast_gpus():
    """Narayanan et al. 2021, Section 3.2: 2(t-1)F / (9hB(1 + s/6h)) of the GEMMs' time."""
    narrow_h100 = allreduce_share(_shaped(4096), H100, 8)
    wide_a100 = allreduce_share(_shaped(8192), A100, 8)
    assert narrow_h100 == pytest.approx(2 * 7 * 989.5e12 / (9 * 4096 * 450e9 * (1 + 4096 / (6 * 4096))))
    assert 0.6 < narrow_h100 < 0.8 and 0.15 < wide_a100 < 0.2
    assert allreduce_share(_shaped(4096), H100, 1) == 0.0


def test_without_the_shape_or_a_switched_fabric_there_is_no_price():
    assert allreduce_share(_shaped(0), H100, 8) is None
    assert allreduce_share(_shaped(4096, seq=0), H100, 8) is None
    pcie = replace(H100, gpu_name="NVIDIA A100-PCIE-40GB")
    assert allreduce_share(_shaped(4096), pcie, 8) is None
    assert allreduce_share(_shaped(4096), replace(H100, gpu_name="Some Future Accelerator"), 8) is None


def test_on_a_gpu_the_tensor_parallel_prior_is_the_priced_split(make_context):
    contract = _shaped(4096)
    table = builtin_table(make_context("cuda", contract=contract, hardware=H100))
    for t in (1, 2, 4):
        assert table.get(f"tp={t}").time_log_mean == pytest.approx(split_time(contract, H100, t, 8))
    # tp 8 -> 2 saves 0.44 in log for a 4,096-wide model on H100s, 0.14 for an 8,192-wide one on A100s.
    assert -0.5 < table.get("tp=2").time_log_mean < -0.4
    wide = builtin_table(make_context("cuda", contract=_shaped(8192), hardware=A100))
    assert -0.2 < wide.get("tp=2").time_log_mean < -0.1
    # Without the shape: the table's per-doubling cost, as before.
    plain = builtin_table(make_context("cuda", contract=make_contract(contract.knobs), hardware=H100))
    assert plain.get("tp=2").time_log_mean == pytest.approx(-2 * 0.12)


def test_beyond_the_node_the_table_prices_the_network(make_context):
    contract = _shaped(4096, knobs=[knob("tp", "tensor_parallel", "int", 8, [2, 8, 16])])
    table = builtin_table(make_context("cuda", contract=contract, hardware=replace(H100, gpu_count=16)))
    across = table.get("tp=16")
    assert across.time_log_mean == pytest.approx(0.40)  # inside the node nothing changes: 8 -> 8
    assert across.time_log_sd > table.get("tp=2").time_log_sd


def test_a_mixture_of_experts_is_not_priced_as_a_dense_layer():
    moe = _shaped(4096, knobs=[knob("tp", "tensor_parallel", "int", 1, [1, 2]),
                               knob("ep", "expert_parallel", "int", 8, [1, 8])])
    assert allreduce_share(moe, H100, 2) is None
