"""Roles from the catalog and the domains proposed for them."""

from __future__ import annotations

import pytest

from infrarsi.knobs.catalog import classify, domain, power_of_two_divisors, shape_of
from infrarsi.knobs.raw import RawKnob


def knob(name, default, type_=None, help="", choices=()):
    return RawKnob(name, type_ or type(default).__name__, default, choices=choices, help=help)


def role(name, others=(), help="", default=1):
    k = knob(name, default, help=help)
    rule = classify(k, [name, *others])
    return rule.role, rule.aspect


@pytest.mark.parametrize(
    "name, expected",
    [
        ("micro_batch_size", ("micro_batch", "")),
        ("gradient_accumulation_steps", ("grad_accum", "")),
        ("threads", ("threads", "")),
        ("activation_checkpointing", ("activation_checkpointing", "")),
        ("compile", ("compile", "")),
        ("dtype", ("dtype", "")),
        ("optimizer_impl", ("optimizer_impl", "")),
        ("num_workers", ("dataloader_workers", "")),
        ("bucket_cap_mb", ("ddp_bucket_mb", "")),
        ("gradient_as_bucket_view", ("ddp_grad_as_bucket_view", "")),
        ("static_graph", ("ddp_static_graph", "")),
        ("max_iters", ("steps", "")),
        ("block_size", ("workload", "seq_len")),
        ("n_layer", ("workload", "model")),
        ("n_expert", ("workload", "model")),
        ("top_k", ("workload", "model")),
        ("aux_loss_coef", ("workload", "model")),
        ("learning_rate", ("workload", "optim")),
        ("warmup_iters", ("workload", "optim")),
        ("lr_decay_iters", ("workload", "optim")),
        ("seed", ("workload", "seed")),
        ("dataset", ("workload", "data")),
        ("global_batch_size", ("workload", "global_batch")),
        ("eval_interval", ("unknown", "")),
        ("always_save_checkpoint", ("unknown", "")),
    ],
)
def test_roles_by_name(name, expected):
    assert role(name) == expected


def test_batch_size_means_what_its_neighbours_and_help_say():
    assert role("batch_size", ["micro_batch_size"]) == ("workload", "global_batch")
    assert role("batch_size", ["gradient_accumulation_steps"]) == ("micro_batch", "")  # nanoGPT
    assert role("batch_size") == ("workload", "global_batch")
    assert role("batch_size", ["gradient_accumulation_steps"], help="global batch per step") == ("workload", "global_batch")
    assert role("batch_size", help="per-device batch size") == ("micro_batch", "")
    assert role("total_batch_size", help="total batch size, in number of tokens") == ("workload", "global_tokens")


def test_domains():
    assert power_of_two_divisors(24) == [1, 2, 4, 8]
    values, _ = domain("micro_batch", knob("mbs", 4), global_batch=16, cpu_count=2)
    assert values == [1, 2, 4, 8, 16]
    values, _ = domain("grad_accum", knob("gas", 4), global_batch=32, cpu_count=2)
    assert values == [1, 2, 4, 8, 16, 32]
    assert domain("micro_batch", knob("mbs", 4), global_batch=None, cpu_count=2)[0] == []
    # 0 keeps torch's default, which already uses every physical core: that count is not tried again.
    assert domain("threads", knob("threads", 0), global_batch=16, cpu_count=2, auto_threads=2)[0] == [0, 1]
    assert domain("threads", knob("threads", 0), global_batch=16, cpu_count=2)[0] == [0, 1, 2]  # torchrun
    assert domain("threads", knob("threads", 0), global_batch=16, cpu_count=4, auto_threads=2)[0] == [0, 1, 3, 4]
    assert domain("threads", knob("threads", 2), global_batch=16, cpu_count=4)[0] == [1, 2, 3, 4]
    assert domain("compile", knob("compile", False), global_batch=16, cpu_count=2)[0] == [False, True]
    assert domain("dtype", knob("dtype", "float32"), global_batch=16, cpu_count=2)[0] == ["float32", "bfloat16"]
    impl = knob("optimizer_impl", "foreach", choices=("for-loop", "foreach", "fused"))
    assert domain("optimizer_impl", impl, global_batch=16, cpu_count=2)[0] == ["for-loop", "foreach", "fused"]
    assert domain("dataloader_workers", knob("w", 1), global_batch=16, cpu_count=2)[0] == [0, 1, 2, 4]
    assert domain("ddp_bucket_mb", knob("b", 25), global_batch=16, cpu_count=2)[0] == [10, 25, 50, 100]
    values, why = domain("workload", knob("lr", 1e-3), global_batch=16, cpu_count=2)
    assert (values, why) == ([], "defines the workload")
    values, why = domain("optimizer_impl", knob("optimizer_impl", "adamw"), global_batch=16, cpu_count=2)
    assert values == [] and "without choices" in why


@pytest.mark.parametrize(
    "name, expected",
    [
        ("tensor_model_parallel_size", "tensor_parallel"),  # Megatron-LM, NeMo
        ("tensor_parallel_size", "tensor_parallel"),
        ("tp_size", "tensor_parallel"),  # DeepSpeed
        ("tp", "tensor_parallel"),
        ("tensor_parallel_degree", "tensor_parallel"),  # torchtitan
        ("parallelism.tensor_parallel_degree", "tensor_parallel"),
        ("pipeline_model_parallel_size", "pipeline_parallel"),
        ("pp_size", "pipeline_parallel"),
        ("pp", "pipeline_parallel"),
        ("pipeline_parallel_degree", "pipeline_parallel"),
        ("pipe_parallel_size", "pipeline_parallel"),  # GPT-NeoX
        ("virtual_pipeline_model_parallel_size", "virtual_pipeline"),
        ("sequence_parallel", "sequence_parallel"),
        ("expert_model_parallel_size", "expert_parallel"),
        ("ep_size", "expert_parallel"),
        ("expert_parallel_degree", "expert_parallel"),
        # Not these roles: a layer count, a context-parallel degree, an expert's own tensor split.
        ("num_layers_per_virtual_pipeline_stage", "unknown"),
        ("sequence_parallel_size", "unknown"),
        ("expert_tensor_parallel_size", "unknown"),
        ("pipeline_model_parallel_split_rank", "unknown"),
    ],
)
def test_parallel_layouts_by_name(name, expected):
    assert role(name)[0] == expected


@pytest.mark.parametrize(
    "name, expected",
    [
        ("num_experts", ("workload", "model")),
        ("n_expert", ("workload", "model")),
        ("expert_capacity", ("workload", "model")),
        ("moe_dispatch", ("moe_dispatch", "")),
        ("seq_len", ("workload", "seq_len")),
        ("max_sequence_length", ("workload", "seq_len")),
        ("eps", ("workload", "optim")),
        ("top_k", ("workload", "model")),
        ("zero_stage", ("fsdp", "")),
        ("fsdp_sharding_strategy", ("fsdp", "")),
    ],
)
def test_parallel_layout_rules_leave_neighbouring_names_alone(name, expected):
    assert role(name) == expected


def test_parallel_degrees_divide_the_nodes_gpus():
    assert domain("tensor_parallel", knob("tp", 8), global_batch=16, cpu_count=2, gpus=8)[0] == [1, 2, 4, 8]
    assert domain("pipeline_parallel", knob("pp", 16), global_batch=16, cpu_count=2, gpus=8)[0] == [1, 2, 4, 8, 16]
    assert domain("expert_parallel", knob("ep", 1), global_batch=16, cpu_count=2, gpus=4)[0] == [1, 2, 4]
    values, why = domain("tensor_parallel", knob("tp", 1), global_batch=16, cpu_count=2)
    assert values == [1] and "one device" in why
    assert domain("virtual_pipeline", knob("vpp", 1), global_batch=16, cpu_count=2)[0] == [1, 2, 4]
    assert domain("sequence_parallel", knob("sp", False), global_batch=16, cpu_count=2)[0] == [False, True]
    assert domain("sequence_parallel", knob("sp", 0), global_batch=16, cpu_count=2)[0] == [0, 1]


@pytest.mark.parametrize(("name", "expected"), [
    ("n_embd", "hidden"), ("hidden_size", "hidden"), ("d_model", "hidden"), ("model.dim", "hidden"),
    ("n_head", "heads"), ("num_attention_heads", "heads"), ("nHeads", "heads"),
    ("n_layer", "layers"), ("num_hidden_layers", "layers"), ("model.n_layers", "layers"),
    ("n_kv_heads", ""), ("head_dim", ""), ("ffn_dim", ""), ("layer_norm_eps", ""),
])
def test_the_model_s_sizes_by_name(name, expected):
    assert shape_of(name) == expected
