"""Built-in beliefs about parallel layouts: tensor, pipeline and expert degrees, interleaving, sequence parallelism."""

import math
from dataclasses import replace

import pytest

from infrarsi.priors import builtin_table
from infrarsi.priors.builtin import NODE_GPUS, Split, split_effect
from tests.priors.conftest import hardware

LAYOUT = [("tp", "tensor_parallel", 2, [1, 2, 4, 8, 16]), ("pp", "pipeline_parallel", 2, [1, 2, 4, 8]),
          ("ep", "expert_parallel", 2, [1, 2, 4, 8, 16]), ("vpp", "virtual_pipeline", 1, [1, 2, 4])]


@pytest.fixture
def layout(make_context, contract_with, tunable):
    """``layout(device, sequence_parallel=False)``: the prior table of a contract with every layout knob."""

    def table(device: str, sequence_parallel: bool = False):
        knobs = [tunable(name, role, "int", default, values) for name, role, default, values in LAYOUT]
        knobs.append(tunable("sp", "sequence_parallel", "bool", sequence_parallel, [False, True]))
        hw = replace(hardware(device), gpu_count=8) if device == "cuda" else hardware(device)
        return builtin_table(make_context(device, contract=contract_with(knobs), hardware=hw))

    return table


def test_every_layout_setting_has_a_sourced_belief(layout, device):
    table = layout(device)
    for name, role, default, values in LAYOUT:
        for v in values:
            prior = table.get(f"{name}={v}")
            assert prior.source.startswith("baseline" if v == default else f"builtin {role}/{device}: "), (name, v)
    assert table.get("sp=True").source.startswith(f"builtin sequence_parallel/{device}: ")


def test_doubling_tensor_parallel_cuts_peak_memory_by_a_third(layout):
    table = layout("cuda", sequence_parallel=True)
    up, down = table.get("tp=4"), table.get("tp=1")
    assert math.log(0.60) < up.mem_log_mean < math.log(0.75)  # tp 2 -> 4: weights, state, activations split
    assert math.log(1.5) < down.mem_log_mean < math.log(1.8)  # tp 2 -> 1
    assert up.mem_log_sd >= 0.2  # how much depends on ZeRO and the model: wide
    mems = [table.get(f"tp={v}").mem_log_mean for v in (1, 2, 4, 8, 16)]
    assert mems == sorted(mems, reverse=True)


def test_without_sequence_parallel_tensor_parallel_saves_less(layout):
    with_sp, without = layout("cuda", sequence_parallel=True), layout("cuda", sequence_parallel=False)
    assert with_sp.get("tp=4").mem_log_mean < without.get("tp=4").mem_log_mean < 0


def test_tensor_parallel_costs_time_and_much_more_across_nodes(layout):
    table = layout("cuda")
    within = table.get("tp=8").time_log_mean - table.get("tp=4").time_log_mean
    across = table.get("tp=16").time_log_mean - table.get("tp=8").time_log_mean
    assert 0 < within < 0.2 < across  # NODE_GPUS = 8: tp 16 spans two nodes
    assert table.get("tp=16").time_log_sd > table.get("tp=8").time_log_sd
    assert NODE_GPUS == 8


def test_pipeline_parallel_splits_state_not_activations_and_adds_bubble(layout):
    table = layout("cuda")
    pp, tp = table.get("pp=4"), table.get("tp=4")
    assert tp.mem_log_mean < pp.mem_log_mean < math.log(0.8)
    assert 0 < pp.time_log_mean < 0.1 and table.get("pp=1").time_log_mean < 0
    # The pipeline's sends are small: no extra cost for leaving the node.
    assert table.get("pp=8").time_log_mean == pytest.approx(2 * pp.time_log_mean)


def test_expert_parallel_splits_the_experts_and_is_about_even_in_time(layout):
    table = layout("cuda")
    ep = table.get("ep=4")
    assert math.log(0.6) < ep.mem_log_mean < math.log(0.85) and abs(ep.time_log_mean) < 0.05
    assert table.get("ep=16").time_log_mean > 0.2  # the all-to-all crosses nodes


def test_interleaving_cuts_the_bubble_for_a_little_memory(layout):
    table = layout("cuda")
    prior = table.get("vpp=4")
    assert -0.1 < prior.time_log_mean < 0 < prior.mem_log_mean < 0.1
    # 1 + (p-1)/(p·v) times the activations in flight: two stages cost more than four.
    assert table.get("vpp=2").mem_log_mean > prior.mem_log_mean


def test_sequence_parallel_saves_activation_memory_and_a_little_time(layout, device):
    prior = layout(device).get("sp=True")
    assert prior.mem_log_mean < 0 and -0.1 < prior.time_log_mean <= 0
    off = layout(device, sequence_parallel=True).get("sp=False")
    assert off.mem_log_mean == pytest.approx(-prior.mem_log_mean)


def test_cpu_beliefs_are_smaller_memory_savings_and_dearer_communication(layout):
    cpu, cuda = layout("cpu"), layout("cuda")
    assert cuda.get("tp=4").mem_log_mean < cpu.get("tp=4").mem_log_mean < 0
    assert cpu.get("tp=4").time_log_mean > cuda.get("tp=4").time_log_mean > 0


def test_split_effect_follows_the_memory_curves_split_shape():
    split = Split(share=0.5, inside=0.1, across=0.3, time_sd=0.1)
    effect = split_effect(8, 2, split, node_gpus=4)
    assert effect.mem == pytest.approx(math.log(1 - 0.5 + 0.5 * 2 / 8))
    assert effect.time == pytest.approx(0.1 * 1 + 0.3 * 1)  # 2 -> 4 inside the node, 4 -> 8 beyond it
    assert split_effect(2, 2, split, node_gpus=4).mem == 0
