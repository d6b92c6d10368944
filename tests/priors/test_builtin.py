import math
from dataclasses import replace

import pytest

from infrarsi.patches import REGISTRY, declared_priors
from infrarsi.priors import BuiltinPriors, Prior, builtin_table
from infrarsi.priors.builtin import FILLED_TOKENS


def test_every_key_of_the_contract_has_a_sourced_prior(make_context, device):
    context = make_context(device)
    result = BuiltinPriors().priors(context)
    assert result.ok and result.provider == "builtin"
    for key in context.keys():
        assert key in result.table, key
        assert result.table.get(key).source


def test_the_baseline_setting_has_zero_effect(make_context, device):
    table = builtin_table(make_context(device))
    for key in ("batch_size=16", "threads=2", "compile=False", "dtype=float32"):
        assert table.get(key).time_log_mean == 0 and table.get(key).mem_log_mean == 0


def test_bigger_micro_batches_are_faster_and_cost_memory(make_context, device):
    table = builtin_table(make_context(device))
    times = [table.get(f"batch_size={b}").time_log_mean for b in (1, 4, 16, 32)]
    mems = [table.get(f"batch_size={b}").mem_log_mean for b in (1, 4, 16, 32)]
    assert times == sorted(times, reverse=True) and mems == sorted(mems)
    assert table.get("batch_size=1").time_log_sd > table.get("batch_size=4").time_log_sd


@pytest.mark.parametrize("seq", [256, 4096])
def test_on_a_gpu_a_bigger_micro_batch_gains_less_once_its_gemms_are_filled(make_context, contract_with, tunable,
                                                                              seq):
    """Per doubling above the default, 0.12 in log where the default micro-batch holds at most
    ``FILLED_TOKENS`` tokens, a quarter of that at 4,096 (one 4,096-token sample); smaller
    micro-batches cost the same at either length."""
    contract = contract_with([tunable("mb", "micro_batch", "int", 1, [1, 2, 4])])
    contract = replace(contract, workload=replace(contract.workload, seq_len=seq))
    table = builtin_table(make_context("cuda", contract=contract))
    slope = 0.12 * min(1.0, FILLED_TOKENS / seq)
    assert table.get("mb=2").time_log_mean == pytest.approx(-slope * math.log(2))
    assert table.get("mb=4").time_log_mean == pytest.approx(-slope * math.log(4))


def test_accumulation_defers_to_the_micro_batch_knob_when_there_is_one(make_context, contract_with, tunable):
    coupled = builtin_table(make_context("cpu"))
    assert abs(coupled.get("gradient_accumulation_steps=16").time_log_mean) < 0.01
    alone = builtin_table(make_context("cpu", contract=contract_with(
        [tunable("gradient_accumulation_steps", "grad_accum", "int", 1, [1, 16])])))
    assert alone.get("gradient_accumulation_steps=16").time_log_mean > 0.1  # 16x smaller micro-batches
    assert alone.get("gradient_accumulation_steps=16").mem_log_mean < 0


def test_threads_help_up_to_the_cores_and_oversubscription_hurts(make_context):
    table = builtin_table(make_context("cpu"))  # 2 cores
    assert table.get("threads=1").time_log_mean == pytest.approx(math.log(1.77), abs=0.05)
    assert table.get("threads=4").time_log_mean > 0.3


def test_threads_per_rank_oversubscribe_with_the_baselines_ranks(make_context, contract_with, tunable):
    """2 ranks x 1 thread fill 2 cores: 2 threads per rank, or 4 ranks, run 4 threads on them."""
    shape = [tunable("nproc_per_node", "nproc_per_node", "int", 2, [1, 2, 4]),
             tunable("threads", "threads", "int", 1, [1, 2])]
    table = builtin_table(make_context("cpu", contract=contract_with(shape)))
    assert table.get("threads=2").time_log_mean > 0.5 and table.get("nproc_per_node=4").time_log_mean > 0.5
    # One rank of one thread leaves a core idle: slower, but not the oversubscribed penalty.
    assert 0.3 < table.get("nproc_per_node=1").time_log_mean < table.get("nproc_per_node=4").time_log_mean
    alone = builtin_table(make_context("cpu", contract=contract_with([shape[1]])))
    assert alone.get("threads=2").time_log_mean < 0  # one process: 2 threads on 2 cores help


def test_a_longer_logging_interval_is_believed_a_small_sure_gain(make_context, contract_with, tunable, device):
    table = builtin_table(make_context(device, contract=contract_with([tunable("log_interval", "logging", "int", 10,
                                                                               [10, 40, 160])])))
    small, large = table.get("log_interval=40"), table.get("log_interval=160")
    assert -0.03 < large.time_log_mean < small.time_log_mean < 0 and large.mem_log_mean == 0
    # Narrow, unlike the neutral prior a knob without a belief gets: the search does not spend early trials on it.
    assert large.time_log_sd <= 0.03 and "builtin logging" in large.source


def test_checkpointing_trades_time_for_memory(make_context, device):
    prior = builtin_table(make_context(device)).get("checkpointing=True")
    assert math.log(1.1) < prior.time_log_mean < math.log(1.4) and prior.mem_log_mean < -0.1


def test_switching_a_default_on_knob_off_is_the_opposite_effect(make_context, contract_with, tunable):
    context = make_context("cuda", contract=contract_with(
        [tunable("checkpointing", "activation_checkpointing", "bool", True, [True, False])]))
    prior = builtin_table(context).get("checkpointing=False")
    assert prior.time_log_mean < 0 and prior.mem_log_mean > 0


def test_cpu_and_cuda_hold_different_beliefs_where_they_differ(make_context):
    cpu, cuda = builtin_table(make_context("cpu")), builtin_table(make_context("cuda"))
    # compile: a start-up cost on both, a steady-state gain only on CUDA
    assert cpu.get("compile=True").startup_s > 10 and cuda.get("compile=True").startup_s > 10
    assert abs(cpu.get("compile=True").time_log_mean) < 0.05 < -cuda.get("compile=True").time_log_mean
    # bf16: the common belief (faster) on CPU, with only moderate confidence, and the known
    # miscalibration written down in the source so a reader sees why live data overrules it
    bf16_cpu, bf16_cuda = cpu.get("dtype=bfloat16"), cuda.get("dtype=bfloat16")
    assert bf16_cpu.time_log_mean < 0 and bf16_cpu.time_log_sd >= 0.25 and "20x slower" in bf16_cpu.source
    assert bf16_cuda.time_log_mean < bf16_cpu.time_log_mean and bf16_cuda.time_log_sd < bf16_cpu.time_log_sd
    assert cuda.get("optimizer=fused").time_log_mean < cpu.get("optimizer=fused").time_log_mean < 0
    assert "cpu" in cpu.get("compile=True").source and "cuda" in cuda.get("compile=True").source


def test_values_the_table_cannot_read_get_no_entry(make_context, contract_with, tunable):
    context = make_context("cpu", contract=contract_with([tunable("dtype", "dtype", "str", "float32", ["int4"])]))
    table = builtin_table(context)
    assert "dtype=int4" not in table and table.get("dtype=int4").time_log_sd >= 1.0


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_library_patch_declares_a_sourced_prior_on_both_devices(make_context, device, name):
    prior = builtin_table(make_context(device, patches={name: declared_priors(device)[name]})).get(f"patch:{name}")
    assert prior.source.startswith(f"builtin patch/{device}: ") and prior.source != f"builtin patch/{device}: "


def test_a_patch_keeps_the_prior_it_declares(make_context):
    declared = Prior(key="patch:fuse_rmsnorm", time_log_mean=-0.1, time_log_sd=0.32, mem_log_mean=0.0,
                     mem_log_sd=0.32, source="llm-proposed patch")
    table = builtin_table(make_context("cpu", patches={"fuse_rmsnorm": declared,
                                                       "sdpa_attention": declared_priors("cpu")["sdpa_attention"]}))
    assert table.get("patch:fuse_rmsnorm") == declared
    assert table.get("patch:sdpa_attention") == declared_priors("cpu")["sdpa_attention"]
    assert table.get("patch:ddp_no_sync").time_log_sd >= 1.0  # not offered: neutral


def test_a_patch_that_sets_a_knob_role_declares_that_roles_belief(make_context, contract_with, tunable, device):
    """sdpa_attention is the attention_impl knob set to sdpa: one belief, not two that drift apart."""
    knob = tunable("attention", "attention_impl", "str", "manual", ["manual", "sdpa"])
    table = builtin_table(make_context(device, contract=contract_with([knob]),
                                       patches={"sdpa_attention": declared_priors(device)["sdpa_attention"]}))
    as_knob, as_patch = table.get("attention=sdpa"), table.get("patch:sdpa_attention")
    assert (as_knob.time_log_mean, as_knob.mem_log_mean) == (as_patch.time_log_mean, as_patch.mem_log_mean)
