"""The built-in catalog: what role a knob plays, judged from its name (and help text for batch sizes),
and the values the search may try for each tunable role.

Workload knobs (global batch, sequence length, model shape, optimizer hyper-parameters, seed,
data, device) define the job: they are locked as invariants. Each one carries an ``aspect`` that
says which part of the workload it fixes; init reads ``global_batch`` and ``seq_len`` from it.
A name the catalog does not know gets role ``unknown`` and stays at its default.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from infrarsi import batch
from infrarsi.contract import KnobValue
from infrarsi.knobs.raw import RawKnob


@dataclass(frozen=True, slots=True)
class Rule:
    role: str
    pattern: str
    """A regex matched against the whole normalized name (lower case, ``-`` as ``_``)."""
    aspect: str = ""
    """For role ``workload``: global_batch | global_tokens | seq_len | model | optim | seed | data | device."""


_GLOBAL_BATCH = r"(global|total|effective)_?(batch(_size)?|bs)"
_BATCH = r"batch(_size)?|bs|train_batch_size"
_MICRO = (
    r"micro_?batch(_size)?|micro_bs|mbs|per_device_(train_)?batch_size|(device|local)_batch_size"
    r"|batch_size_per_(gpu|device|rank)"
)
_GRAD_ACCUM = r"(gradient|grad)_?acc(um(ulation)?)?(_steps|_iters?)?|accum(ulation)?(_steps|_iters?)?|ga_steps"

CATALOG: tuple[Rule, ...] = (
    Rule("steps", r"(max|num|n|total|train)?_?(iters?|iterations|steps)|num_train_steps"),
    Rule("micro_batch", _MICRO),
    Rule("grad_accum", _GRAD_ACCUM),
    Rule("threads", r"(num_|n_|torch_|intra_op_|omp_|cpu_)?threads|nthreads"),
    Rule(
        "activation_checkpointing",
        r"(activation|act|gradient|grad)_?(checkpointing|checkpoint|ckpt)|checkpoint_activations"
        r"|recompute(_activations)?|ac|use_(activation_)?checkpointing",
    ),
    Rule("compile", r"(torch_|use_)?compile(_model|_mode)?"),
    Rule("dtype", r"(amp_|autocast_|param_|compute_)?dtype|precision|mixed_precision|(use_)?(amp|bf16|fp16)"),
    Rule("optimizer_impl", r"(optimizer|optim|adam|adamw)_(impl|implementation|backend|kind)|fused(_adam|_adamw|_optimizer)?|foreach"),
    Rule("dataloader_workers", r"(num_|n_|dataloader_|loader_|data_)?workers"),
    Rule("ddp_bucket_mb", r"(ddp_)?bucket_(cap|size)(_mb)?|bucket_mb"),
    Rule("ddp_grad_as_bucket_view", r"(ddp_)?(gradient|grad)s?_as_bucket_view"),
    Rule("ddp_static_graph", r"(ddp_)?static_graph"),
    Rule("attention_impl", r"(attention|attn)(_impl|_implementation|_backend|_kernel)?|(use_)?(flash|sdpa)(_attn|_attention)?"),
    Rule("moe_dispatch", r"(moe_|expert_)?dispatch(_impl|_mode)?|moe_impl"),
    Rule("zero_grad", r"(zero_grad_)?set_to_none|zero_grad(_mode|_impl)?"),
    Rule("fsdp", r"(use_)?fsdp|fsdp_\w+|sharding(_strategy)?|zero_stage"),
    # Parallel layouts as Megatron-LM, NeMo, DeepSpeed and torchtitan spell them. Interleaving is a
    # stage count per pipeline rank; ``num_layers_per_virtual_pipeline_stage`` is a layer count and
    # stays unknown, as does DeepSpeed-Ulysses' ``sequence_parallel_size`` (a degree, not the switch).
    Rule("tensor_parallel", r"tensor_(model_)?parallel(_size|_degree)?|tp(_size|_degree)?"),
    Rule("virtual_pipeline", r"virtual_pipeline_(model_)?parallel(_size|_degree)?|vpp(_size)?"),
    Rule("pipeline_parallel", r"pipeline_(model_)?parallel(_size|_degree)?|pipe_parallel_size|pp(_size|_degree)?"),
    Rule("sequence_parallel", r"(use_|enable_)?sequence_parallel(ism)?"),
    Rule("expert_parallel", r"expert_(model_)?parallel(_size|_degree)?|ep_(size|degree)"),
    Rule("workload", _GLOBAL_BATCH, "global_batch"),
    Rule(
        "workload",
        r"block_size|(max_)?seq(uence)?_?len(gth)?|context_(length|len|size)|n_ctx|ctx_len|max_length"
        r"|max_position_embeddings",
        "seq_len",
    ),
    Rule(
        "workload",
        r"n_?layers?|num_(hidden_)?layers|depth|n_?heads?|num_(attention_)?heads|n_kv_heads?|n_?embd|d_model|dim"
        r"|hidden_(size|dim)|emb(ed(ding)?)?_(dim|size)|head_dim|(n_)?vocab(_size)?|(ffn|mlp|intermediate)_(dim|size|ratio|hidden)"
        r"|ffn_mult|n_?experts?|num_(local_)?experts|top_?k|experts_per_tok(en)?|capacity_factor|expert_capacity"
        r"|aux_loss(_coef|_weight|_alpha)?|router_\w+|bias|dropout|init_from|model(_name|_size|_type)?|tie_\w+"
        r"|norm_eps|rope_theta",
        "model",
    ),
    Rule(
        "workload",
        r"learning_rate|lr|(max|min|base|peak)_lr|\w*warmup\w*|lr_\w+|decay_lr|weight_decay|wd|beta[12]|betas"
        r"|(adam_)?eps(ilon)?|grad_clip|clip_grad(_norm)?|max_grad_norm|momentum|label_smoothing|optimizer|optim",
        "optim",
    ),
    Rule("workload", r"(random_|data_|torch_|manual_)?seed", "seed"),
    Rule(
        "workload",
        r"dataset|data(_dir|_path|_root|_file)?|(train|val|eval)_(data|file|path)|tokenizer\w*",
        "data",
    ),
    Rule("workload", r"device(_type)?|(dist_)?backend", "device"),
)


def normalize(name: str) -> str:
    """Lower snake case: ``batchSize`` and ``batch-size`` read as ``batch_size``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower().replace("-", "_")


def _match(name: str, pattern: str) -> bool:
    """Whether the name, or for a nested setting (``trainer.max_iters``) its last part, fits."""
    return re.fullmatch(pattern, normalize(name.rsplit(".", 1)[-1])) is not None


def _batch_rule(knob: RawKnob, names: list[str]) -> Rule:
    """A plain ``batch_size`` is the micro-batch when accumulation is its own knob (nanoGPT), the
    global batch otherwise; its help text, when it says so, decides."""
    text = knob.help.lower()
    if re.search(r"micro|per[ -_](device|gpu|rank|replica)", text):
        return Rule("micro_batch", "")
    if re.search(r"global|total|per (optimizer )?step|effective", text):
        return Rule("workload", "", "global_tokens" if "token" in text else "global_batch")
    others = [n for n in names if n != knob.name]
    if any(_match(n, _MICRO) for n in others):
        return Rule("workload", "", "global_batch")
    if any(_match(n, _GRAD_ACCUM) for n in others) and not any(_match(n, _GLOBAL_BATCH) for n in others):
        return Rule("micro_batch", "")
    return Rule("workload", "", "global_batch")


def classify(knob: RawKnob, names: list[str]) -> Rule:
    """The catalog rule for ``knob`` given every knob name of the script (batch sizes depend on the others)."""
    if _match(knob.name, _BATCH):
        return _batch_rule(knob, names)
    for rule in CATALOG:
        if _match(knob.name, rule.pattern):
            if rule.role == "steps" and re.search(r"\bepochs?\b", knob.help.lower()):
                return Rule("unknown", "")  # counts epochs, not steps: the launcher stops the trial instead
            if rule.aspect == "global_batch" and "token" in knob.help.lower():
                return Rule("workload", rule.pattern, "global_tokens")
            return rule
    return Rule("unknown", "")


_SHAPE = {"hidden": r"n_?embd|d_model|hidden_(size|dim)|dim|emb(ed(ding)?)?_(dim|size)",
          "heads": r"n_?heads?|num_(attention_)?heads",
          "layers": r"n_?layers?|num_(hidden_)?layers"}


def shape_of(name: str) -> str:
    """Which of the model's sizes a model knob holds: hidden | heads | layers | "" (none)."""
    return next((what for what, pattern in _SHAPE.items() if _match(name, pattern)), "")


def counts_epochs(knob: RawKnob) -> bool:
    """Whether the knob is the job's number of passes over its data (``--epochs``, or an ``--niter``
    whose help says "number of epochs to train for")."""
    text = knob.help.lower()
    named = _match(knob.name, r"(max|num|n|train|num_train)?_?epochs?")
    return isinstance(knob.default, (int, float)) and not isinstance(knob.default, bool) and (
        named or re.search(r"\b(number of|how many) (training )?epochs\b|\bepochs to train\b", text) is not None)


_SWITCHES = ("compile", "activation_checkpointing", "attention_impl", "matmul_precision", "fsdp", "dtype",
             "ddp_static_graph", "ddp_grad_as_bucket_view", "dataloader_pin_memory", "dataloader_persistent",
             "sequence_parallel")
"""Roles whose knob, when an int, switches a feature on and off."""

# Values tried for roles whose domain does not depend on the script (the default is always added).
_WORKERS = (0, 2, 4)
_OPTIMIZER_IMPLS = ("for-loop", "foreach", "fused")
_BUCKETS_MB = (10, 25, 50, 100)
_DTYPES = ("float32", "bfloat16")
_DEGREES = ("tensor_parallel", "pipeline_parallel", "expert_parallel")
"""Roles that split the model over that many devices."""
_VIRTUAL_STAGES = (1, 2, 4)


def _with_default(values: Sequence[KnobValue], default: KnobValue) -> list[KnobValue]:
    out = list(dict.fromkeys([*values, default]))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in out):
        out.sort()
    return out


def power_of_two_divisors(n: int) -> list[int]:
    out, m = [], 1
    while m <= n:
        if n % m == 0:
            out.append(m)
        m *= 2
    return out


def domain(role: str, knob: RawKnob, *, global_batch: int | None, cpu_count: int,
           auto_threads: int | None = None, constants: tuple = (), gpus: int = 0) -> tuple[list[KnobValue], str]:
    """(values the search may try, why it is fixed when it is): a domain of one value means fixed.

    ``auto_threads``: how many threads a non-positive thread count (the library's default) means,
    when that is known (torch's physical cores for a single process). ``constants``: what the code
    compares a switch with (``if zero_stage == 1``), so an int switch can try them. ``gpus``: the
    GPUs this machine has, which a parallel degree's values divide."""
    default = knob.default
    assert default is not None
    if role in ("workload", "unknown", "steps"):
        return [], {"workload": "defines the workload", "unknown": "not in the catalog", "steps": "set by the contract"}[role]
    if knob.type == "bool":
        return [False, True], ""
    if knob.choices:
        return _with_default(list(knob.choices), default), ""
    if role == "micro_batch" and knob.type == "int":
        if not global_batch:
            return [], "the global batch is unknown, so the micro-batches that divide it are too"
        return _with_default(power_of_two_divisors(global_batch), default), ""
    if role == "grad_accum" and knob.type == "int":
        if not global_batch:
            return [], "the global batch is unknown, so the accumulation steps that divide it are too"
        return _with_default([batch.accumulation(global_batch, m) for m in power_of_two_divisors(global_batch)],
                             default), ""
    if role in _DEGREES and knob.type == "int":
        # Powers of two dividing the node's GPUs: what a degree's product with the others must divide
        # on one node; a multi-node job's larger default is kept.
        degrees: list[KnobValue] = list(power_of_two_divisors(max(gpus, 1)))
        values = _with_default(degrees, default)
        return (values, "") if len(values) > 1 else (values, "one device: nothing to split the model over")
    if role == "virtual_pipeline" and knob.type == "int":
        return _with_default(list(_VIRTUAL_STAGES), default), ""
    if role == "threads" and knob.type == "int":
        counts = list(range(1, cpu_count + 1))
        if auto_threads and isinstance(default, int) and default <= 0:  # the default already runs that many
            counts = [n for n in counts if n != auto_threads]
        return _with_default(counts, default), ""
    if role == "dtype" and knob.type == "str":
        return _with_default(list(_DTYPES), default), ""
    if role == "optimizer_impl" and knob.type == "str" and default in _OPTIMIZER_IMPLS:
        # Without declared choices, only a default in this common spelling says how the others are spelled.
        return list(_OPTIMIZER_IMPLS), ""
    if role in ("dataloader_workers", "preprocessing_workers") and knob.type == "int":
        return _with_default(list(_WORKERS), default), ""
    if role == "dataloader_prefetch" and knob.type == "int":
        return _with_default([2, 4, 8], default), ""
    if role in ("eval_batch", "logging") and knob.type == "int" and isinstance(default, int) and default > 0:
        factors = (0.5, 1, 2, 4) if role == "eval_batch" else (1, 4, 16)
        return _with_default([max(1, int(default * f)) for f in factors], default), ""
    if role in _SWITCHES and knob.type == "int" and isinstance(default, int):
        # An int used as a switch (``--compile 1``): off, on, and what the code compares it with.
        values = [0, 1, *(c for c in constants if isinstance(c, int) and not isinstance(c, bool))]
        return _with_default(values, default), ""
    if role == "ddp_bucket_mb" and knob.type in ("int", "float"):
        cast = int if knob.type == "int" else float
        return _with_default([cast(v) for v in _BUCKETS_MB], default), ""
    return [], f"no built-in values for a {knob.type} {role} knob without choices"
