"""Where two settings are likely to interact on step time: a prior sd per pair of roles.

The per-setting priors (``builtin``) are effects against the baseline, and the search's time model
adds them. Some settings change what another one does: on a CPU with bf16 units this project
measured bf16 autocast 1.6x faster than float32 without the SDPA patch and 1.5x slower than
float32 with it (issue 53: the fused kernel's bf16 path against the math one), so two slow trials
of bf16, both with SDPA, said nothing about bf16 without it. Each pair of settings from two
dimensions gets an interaction term on log step time, zero in the mean, with the sd below:
``DEFAULT_PAIR_SD`` for any two settings, larger where the roles are known to meet in the same
kernels, threads or memory. A patch reads as the role it stands for (``PATCH_ROLES``).

The sds are beliefs, not fits: an interaction the trials have not touched keeps its whole sd,
which is what lets the search see that a setting tried in one context is unknown in another.
"""

from __future__ import annotations

DEFAULT_PAIR_SD = 0.02
"""Any two settings whose roles are not known to meet: up to ~4% either way together beyond what
each does alone. Small, because a candidate holds many such pairs (six settings, fifteen pairs):
at 0.05 their sum made every untried combination uncertain by 20%."""

PATCH_ROLES = {
    "sdpa_attention": "attention_impl",
    "autocast_bf16": "dtype",
    "tf32_matmul": "matmul_precision",
    "activation_checkpointing": "activation_checkpointing",
    "compile_model": "compile",
    "moe_batched_dispatch": "moe_dispatch",
    "optimizer_foreach": "optimizer_impl",
    "optimizer_fused": "optimizer_impl",
    "zero_grad_set_to_none": "zero_grad",
    "channels_last": "memory_format",
    "ddp_no_sync": "ddp_no_sync",
    "gradient_accumulation": "grad_accum",
    "pinned_memory": "dataloader_pin_memory",
}
"""The role a library patch plays (its setting's interactions are that role's); a patch not named
here (a model's proposal) gets the default sd with everything."""

PAIR_SD: dict[frozenset[str], tuple[float, str]] = {
    frozenset(pair): (sd, why) for pair, sd, why in (
        (("dtype", "attention_impl"), 0.5,
         "issue 53, this project's CPU with bf16 units: bf16 1.6x faster than float32 without SDPA, 1.5x slower "
         "with it; on CUDA the fused attention kernels run only in 16-bit types"),
        (("dtype", "compile"), 0.3, "inductor generates different kernels per dtype (and casts fuse only when compiled)"),
        (("dtype", "moe_dispatch"), 0.3, "this project's MoE fixture: autocast casts per expert (memory 2.15x under bf16)"),
        (("dtype", "micro_batch"), 0.15, "a 16-bit GEMM's gain grows with its size"),
        (("dtype", "matmul_precision"), 0.15, "TF32 acts on float32 matmuls only"),
        (("dtype", "activation_checkpointing"), 0.1, "the recomputed forward runs in the autocast dtype"),
        (("dtype", "optimizer_impl"), 0.1, "fused optimizers' kernels per parameter dtype"),
        (("micro_batch", "activation_checkpointing"), 0.15, "recomputation's share of a step depends on its size"),
        (("micro_batch", "compile"), 0.15, "fusion's gain and the recompilations depend on the shapes"),
        (("micro_batch", "attention_impl"), 0.15, "the fused attention kernel's gain grows with batch x sequence"),
        (("micro_batch", "moe_dispatch"), 0.2, "batched dispatch gains with the tokens each expert gets"),
        (("micro_batch", "threads"), 0.15, "small GEMMs scale worse across threads"),
        (("threads", "dataloader_workers"), 0.3, "worker processes and compute threads share the cores"),
        (("threads", "nproc_per_node"), 0.4, "ranks x threads beyond the cores oversubscribe (this project: 10x)"),
        (("nproc_per_node", "dataloader_workers"), 0.3, "each rank starts its own workers on the same cores"),
        (("threads", "compile"), 0.15, "inductor's CPU kernels are threaded differently"),
        (("compile", "activation_checkpointing"), 0.2, "compiled recomputation fuses differently"),
        (("compile", "attention_impl"), 0.2, "inductor may already fuse the attention the patch replaces"),
        (("compile", "optimizer_impl"), 0.1, "a compiled step may fuse the optimizer"),
        (("compile", "moe_dispatch"), 0.2, "data-dependent dispatch breaks compiled graphs"),
        (("attention_impl", "activation_checkpointing"), 0.1, "the fused kernel makes the recomputed forward cheaper"),
        (("ddp_no_sync", "nproc_per_node"), 0.2, "skipping the all-reduce matters only across ranks"),
        (("ddp_no_sync", "grad_accum"), 0.2, "skipping the all-reduce matters only with accumulation"),
    )
}
"""Role pairs whose settings are known to meet, each with its sd and why. None for the parallel
layout's roles (tensor, pipeline, virtual pipeline, sequence and expert parallelism, ZeRO): each
one's prior is priced from the model's shape and the cluster, and on the simulated clusters sds
of 0.1-0.2 for their pairs (sequence x tensor parallelism, ZeRO x micro-batch, ...) spread
expected improvement over layouts the priors already rank: the 70B's runs reaching 95 % of the
optimum fell from 100 % to 94 %, the MoE's from 92 % to 66 % (docs/benchmarks.md, "Pairwise
interactions and an honest stop")."""


def pair_time_sd(role_a: str, role_b: str) -> float:
    """Prior sd of the log step time two settings of these roles add together, beyond their own effects."""
    return PAIR_SD.get(frozenset((role_a, role_b)), (DEFAULT_PAIR_SD, ""))[0]


def patch_role(name: str) -> str:
    """The role a patch stands for; ``patch:<name>`` for one outside the library's list."""
    return PATCH_ROLES.get(name, f"patch:{name}")
