"""Step time and per-GPU peak memory of Megatron-style training of a GPT-like transformer.

An analytic model, priced from the hardware's datasheet (``bench.sim.hardware``) and a handful of
global efficiency constants, one set for every configuration; docs/sim.md gives the formulas, their
papers and the validation against published measurements. :func:`simulate` is pure and cheap (tens
of microseconds) so a search can call it for every configuration of a large space; invalid
configurations and ones that do not fit come back as results with a status, never as exceptions.

Conventions: ``t, p, d`` tensor, pipeline and data parallel degrees, ``v`` virtual pipeline stages
per rank, ``b`` micro-batch, ``m`` micro-batches per step, ``n = b·s`` tokens per micro-batch;
seconds, bytes and FLOPs throughout; weights and activations in bf16.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from bench.sim.hardware import GPU, Cluster
from bench.sim.stack import FLASH_BYTES, IN_SAMPLE, Stack
from infrarsi.byte_units import GIB

Recompute = Literal["none", "selective", "full"]
Status = Literal["ok", "oom", "invalid"]
RECOMPUTE: tuple[str, ...] = ("none", "selective", "full")

# --- efficiency constants: one set for every GPU and configuration (docs/sim.md: how each was chosen) ---

GEMM_EFF = 0.82
"""Share of the tensor-core peak a large GEMM reaches."""
GEMM_KNEE = 1.0
"""A GEMM whose size ``1/(1/M + 1/N + 1/K)`` (its FLOPs per element moved) equals this many times the
GPU's FLOPs per HBM byte runs at half of ``GEMM_EFF``: small matrices are bound by moving them."""
HBM_EFF = 0.7
"""Share of the HBM bandwidth memory-bound kernels (softmax, dropout, norms, the optimizer) reach."""
COMM_EFF = 0.7
"""Share of a link's bandwidth a large NCCL collective or send reaches."""
DP_OVERLAP = 0.5
"""Share of the last micro-batch's backward that the gradient reduction hides behind."""

# --- counted or assumed, not fitted ----------------------------------------------------------------

COLLECTIVE_LATENCY = 20e-6
"""Seconds one collective or send costs however small (launch and synchronisation)."""
BWD_GEMM = 2.0
"""The backward pass runs two GEMMs (input and weight gradients) per forward GEMM."""
BWD_MEM = 1.5
"""A memory-bound kernel's backward reads its saved input and the incoming gradient and writes one:
about 1.5x the bytes of its forward."""
ELEMENTWISE_BYTES = 22
"""Bytes per element of ``n·h`` a layer's forward moves outside its GEMMs: two layer norms (read 2,
write 2) and two bias-dropout-adds (read 2 + 2, write 2 and a 1-byte mask)."""
SCORE_BYTES = 9
"""Bytes per attention-score element: fused scale-mask-softmax (read 2, write 2) and dropout
(read 2, write 2, 1-byte mask)."""
LOSS_BYTES = 28
"""Bytes per logit the vocabulary-parallel cross entropy moves in fp32, forward and backward."""
OPTIMIZER_BYTES = 38
"""Bytes per parameter the Adam step moves: reads fp32 grad, master, m, v (16), writes master, m, v (12)
and the bf16 weight (2); the gradient norm reads the grad again (4) and zeroing writes it (4)."""
WEIGHT_BYTES, GRAD_BYTES, OPTIMIZER_STATE_BYTES = 2, 4, 12
"""Megatron mixed precision: bf16 weights, fp32 main gradients, fp32 master weights and Adam's two
moments: 18 bytes per parameter before ZeRO partitions them."""
GRAD_COMM_BYTES = 2
"""Gradients are reduced across data-parallel ranks in bf16."""
FRAMEWORK_BYTES = 3 * GIB
"""CUDA context, NCCL buffers, cuBLAS workspaces and allocator slack: present whatever the model."""
STARTUP_BASE_S = 30.0
"""Seconds a job takes to start before its first step: processes, imports, communicators."""
STARTUP_PER_DOUBLING_S = 2.0
"""More seconds per doubling of the GPU count (communicator set-up across nodes)."""
STARTUP_PER_GB_S = 1.0
"""More seconds per GB of weights, gradients and optimizer state a GPU allocates and initialises."""


@dataclass(frozen=True, slots=True)
class Transformer:
    """A GPT-like decoder: ``layers`` blocks of attention and MLP, learned positions, tied embeddings.

    ``ffn`` is the MLP's inner size (each expert's, for a mixture of experts); 0 means ``4·hidden``.
    ``kv_heads`` 0 means multi-head attention (as many key/value heads as query heads).
    """

    layers: int
    hidden: int
    heads: int
    seq: int = 2048
    vocab: int = 51200
    ffn: int = 0
    kv_heads: int = 0
    gated: bool = False
    """A SwiGLU-style MLP: three matrices instead of two."""
    experts: int = 1
    top_k: int = 1

    @property
    def ffn_size(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def moe(self) -> bool:
        return self.experts > 1

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated else 2

    @property
    def attention_params(self) -> int:
        """QKV and output projections with their biases, and the block's two layer norms."""
        h, kv_width = self.hidden, self.kv * self.head_dim
        return h * (h + 2 * kv_width) + (h + 2 * kv_width) + h * h + h + 4 * h

    @property
    def expert_params(self) -> int:
        """One MLP (one expert) with its biases."""
        h, f = self.hidden, self.ffn_size
        return self.mlp_matrices * h * f + (self.mlp_matrices - 1) * f + h

    @property
    def layer_params(self) -> int:
        router = self.hidden * self.experts if self.moe else 0
        return self.attention_params + self.experts * self.expert_params + router

    @property
    def embedding_params(self) -> int:
        return (self.vocab + self.seq) * self.hidden

    @property
    def params(self) -> int:
        """All parameters (the output layer shares the word embedding); 12lh²(1 + 13/12h + (V+s)/12lh)
        for a dense GPT, Narayanan et al. 2021."""
        return self.layers * self.layer_params + self.embedding_params

    def flops_per_token(self) -> tuple[float, float, float]:
        """Forward FLOPs per token of one layer's weight GEMMs, of one layer's attention scores and
        values (``4·s·h``), and of the logits (``2·h·V``)."""
        h, f = self.hidden, self.ffn_size
        attention = 2 * (h * (h + 2 * self.kv * self.head_dim) + h * h)
        mlp = 2 * self.top_k * self.mlp_matrices * h * f
        return attention + mlp, 4 * self.seq * h, 2 * h * self.vocab


@dataclass(frozen=True, slots=True)
class Parallel:
    """How one step is split: ``tp·pp·dp`` GPUs, ``global_batch = micro_batch · micro_batches · dp``.

    ``zero`` partitions over the data-parallel ranks the optimizer states (1, Megatron's distributed
    optimizer), the gradients too (2) and the weights too (3). ``ep`` splits the experts over that
    many data-parallel ranks.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    micro_batch: int = 1
    global_batch: int = 1
    vpp: int = 1
    """Virtual pipeline stages per pipeline rank (the interleaved schedule when above 1)."""
    zero: int = 0
    recompute: Recompute = "none"
    sequence_parallel: bool = False
    ep: int = 1

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.micro_batch * self.dp)


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Where a step's seconds go; the parts add up to the step."""

    compute: float = 0.0
    bubble: float = 0.0
    tp_comm: float = 0.0
    dp_comm: float = 0.0
    """The part of the gradient reduction (and ZeRO's gathers) not hidden behind the backward."""
    pp_comm: float = 0.0
    ep_comm: float = 0.0
    optimizer: float = 0.0

    @property
    def total(self) -> float:
        return (self.compute + self.bubble + self.tp_comm + self.dp_comm + self.pp_comm + self.ep_comm
                + self.optimizer)


@dataclass(frozen=True, slots=True)
class Memory:
    """Bytes on the GPU that needs the most (the first or the last pipeline stage)."""

    weights: float = 0.0
    grads: float = 0.0
    optimizer: float = 0.0
    activations: float = 0.0
    overhead: float = 0.0

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer + self.activations + self.overhead


@dataclass(frozen=True, slots=True)
class SimResult:
    """One simulated configuration: ``ok``, ``oom`` (priced, but its peak exceeds HBM) or ``invalid``."""

    status: Status
    reason: str = ""
    step_s: float = math.nan
    peak_bytes: float = 0.0
    tflops_per_gpu: float = math.nan
    """Executed FLOPs (recomputation included) per second per GPU, Narayanan et al.'s measure."""
    mfu: float = math.nan
    """Model FLOPs (no recomputation) per second over the GPUs' peak."""
    startup_s: float = math.nan
    breakdown: Breakdown = field(default_factory=Breakdown)
    memory: Memory = field(default_factory=Memory)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def oom(self) -> bool:
        return self.status == "oom"


@dataclass(frozen=True, slots=True)
class Noise:
    """Run-to-run noise of a measured step time: lognormal with mean the model's step and this CV."""

    cv: float = 0.02

    def draw(self, step_s: float, rng: np.random.Generator, size: int | None = None) -> float | np.ndarray:
        sigma = math.sqrt(math.log1p(self.cv ** 2))
        return step_s * rng.lognormal(-sigma ** 2 / 2, sigma, size)


def invalid(model: Transformer, par: Parallel, cluster: Cluster) -> str:
    """Why the configuration cannot run as Megatron would run it, or "" when it can."""
    ints = {"tp": par.tp, "pp": par.pp, "dp": par.dp, "micro_batch": par.micro_batch,
            "global_batch": par.global_batch, "vpp": par.vpp, "ep": par.ep, "layers": model.layers,
            "hidden": model.hidden, "heads": model.heads, "seq": model.seq, "vocab": model.vocab,
            "experts": model.experts, "top_k": model.top_k, "ffn": model.ffn_size, "kv_heads": model.kv}
    for name, value in ints.items():
        if value < 1:
            return f"{name} must be at least 1, not {value}"
    t, p, d = par.tp, par.pp, par.dp
    checks = (
        (t * p * d != cluster.gpus, f"tp*pp*dp = {t}*{p}*{d} = {t * p * d}, not the cluster's {cluster.gpus} GPUs"),
        (model.hidden % model.heads != 0, f"hidden {model.hidden} is not a multiple of heads {model.heads}"),
        (model.heads % t != 0, f"heads {model.heads} are not divisible by tp {t}"),
        (model.heads % model.kv != 0, f"heads {model.heads} are not a multiple of kv_heads {model.kv}"),
        (model.kv % t != 0, f"kv_heads {model.kv} are not divisible by tp {t}"),
        (model.ffn_size % t != 0, f"ffn {model.ffn_size} is not divisible by tp {t}"),
        (model.layers % p != 0, f"layers {model.layers} are not divisible by pp {p}"),
        (par.vpp > 1 and p == 1, "virtual pipeline stages (vpp > 1) need pipeline parallelism (pp > 1)"),
        (model.layers % (p * par.vpp) != 0,
         f"layers {model.layers} are not divisible by pp*vpp = {p * par.vpp}"),
        (par.global_batch % (par.micro_batch * d) != 0,
         f"global_batch {par.global_batch} is not a multiple of micro_batch*dp = {par.micro_batch * d}"),
        (par.zero not in (0, 1, 2, 3), f"zero stage {par.zero} is not 0, 1, 2 or 3"),
        (par.zero >= 2 and p > 1, f"ZeRO stage {par.zero} with pipeline parallelism (pp {p}) is not supported: "
                                  "use zero <= 1 with pp > 1"),
        (par.recompute not in RECOMPUTE, f"recompute {par.recompute!r} is not one of {', '.join(RECOMPUTE)}"),
        (model.top_k > model.experts, f"top_k {model.top_k} exceeds experts {model.experts}"),
        (par.ep > 1 and not model.moe, "expert parallelism (ep > 1) needs a mixture of experts"),
        (model.experts % par.ep != 0, f"experts {model.experts} are not divisible by ep {par.ep}"),
        (d % par.ep != 0, f"ep {par.ep} does not divide dp {d} (experts are split over data-parallel ranks)"),
    )
    return next((why for bad, why in checks if bad), "")


def _gemm_s(gpu: GPU, m: float, n: float, k: float, stack: Stack = IN_SAMPLE) -> float:
    """Seconds of an ``m×k @ k×n`` GEMM: its FLOPs at an efficiency that saturates with its size
    (on the stack's padded tiles, when it pads)."""
    pm, pn, pk = stack.padded(m), stack.padded(n), stack.padded(k)
    size = 1.0 / (1.0 / pm + 1.0 / pn + 1.0 / pk)
    eff = GEMM_EFF * stack.k("gemm_eff") / (1.0 + GEMM_KNEE * gpu.peak_flops / gpu.hbm_bw / size)
    return 2.0 * pm * pn * pk / (gpu.peak_flops * eff)


def _mem_s(gpu: GPU, nbytes: float, stack: Stack = IN_SAMPLE) -> float:
    return nbytes / (gpu.hbm_bw * HBM_EFF * stack.k("hbm_eff"))


def _ring_s(nbytes: float, ranks: int, bw: float, steps: float, stack: Stack = IN_SAMPLE) -> float:
    """A ring collective in which each rank moves ``steps·(ranks-1)/ranks`` of ``nbytes`` (2 for an
    all-reduce, 1 for a reduce-scatter, an all-gather or an all-to-all)."""
    if ranks <= 1:
        return 0.0
    return steps * (ranks - 1) / ranks * nbytes / (bw * COMM_EFF * stack.k("comm_eff")) + COLLECTIVE_LATENCY


def _over_dp(cluster: Cluster, par: Parallel, dense_bytes: float, expert_bytes: float, steps: float,
             stack: Stack = IN_SAMPLE) -> float:
    """A ring collective of the dense parameters' bytes over the data-parallel ranks (``tp`` apart) and
    of the experts' over the ``dp/ep`` ranks that hold the same experts (``tp·ep`` apart)."""
    expert_dp = par.dp // par.ep
    return (_ring_s(dense_bytes, par.dp, cluster.ring_bw(par.dp, par.tp), steps, stack)
            + _ring_s(expert_bytes, expert_dp, cluster.ring_bw(expert_dp, par.tp * par.ep), steps, stack))


@dataclass(frozen=True, slots=True)
class _Layer:
    """Forward seconds of one layer for one micro-batch on one GPU, GEMMs apart from memory-bound
    kernels: outside attention's core (projections, MLP, norms, dropouts) and in it (scores, softmax,
    dropout, values)."""

    dense_gemm: float
    dense_mem: float
    core_gemm: float
    core_mem: float

    @property
    def dense(self) -> float:
        return self.dense_gemm + self.dense_mem

    @property
    def core(self) -> float:
        return self.core_gemm + self.core_mem

    @property
    def forward(self) -> float:
        return self.dense + self.core

    @property
    def backward(self) -> float:
        return BWD_GEMM * (self.dense_gemm + self.core_gemm) + BWD_MEM * (self.dense_mem + self.core_mem)


def _layer_forward(model: Transformer, par: Parallel, gpu: GPU, sp: bool, stack: Stack = IN_SAMPLE) -> _Layer:
    """One layer's forward for one micro-batch on one tensor-parallel rank (docs/sim.md, "A layer's
    forward"); a fused attention kernel (``stack.flash_attention``) moves q, k, v and the output
    instead of the scores."""
    t, b, s, h = par.tp, par.micro_batch, model.seq, model.hidden
    n, f, kv_width = b * s, model.ffn_size, model.kv * model.head_dim

    def gemm(m: float, n_: float, k: float) -> float:
        return _gemm_s(gpu, m, n_, k, stack)

    gemms = gemm(n, (h + 2 * kv_width) / t, h) + gemm(n, h, h / t)
    up, down = model.mlp_matrices - 1, 1
    if model.moe:
        # Each rank holds experts/ep experts; on average each gets n·top_k·ep/experts tokens.
        local, tokens = model.experts // par.ep, n * model.top_k * par.ep / model.experts
        gemms += local * (gemm(tokens, up * f / t, h) + gemm(tokens, h, down * f / t))
        gemms += gemm(n, model.experts, h)
    else:
        gemms += gemm(n, up * f / t, h) + gemm(n, h, down * f / t)
    activation_bytes = 2 * model.mlp_matrices * n * f * model.top_k / t
    elementwise = ELEMENTWISE_BYTES * n * h / (t if sp else 1) + activation_bytes
    heads = b * model.heads / t
    scores = heads * (gemm(s, s, model.head_dim) + gemm(s, model.head_dim, s))
    core_bytes = (FLASH_BYTES * 4 * heads * s * model.head_dim if stack.flash_attention
                  else SCORE_BYTES * heads * s * s)
    return _Layer(dense_gemm=gemms, dense_mem=_mem_s(gpu, elementwise, stack), core_gemm=scores,
                  core_mem=_mem_s(gpu, core_bytes, stack))


def _stage_params(model: Transformer, par: Parallel) -> tuple[float, float, float]:
    """Parameters one GPU of the heaviest stage holds: dense ones (replicated over ``dp``), expert
    ones (replicated over ``dp/ep``), and one layer's (ZeRO-3 gathers a layer at a time)."""
    per_stage, t = model.layers // par.pp, par.tp
    expert = model.experts * model.expert_params if model.moe else 0
    layer_dense = (model.layer_params - expert) / t
    embedding = model.vocab * model.hidden / t + model.seq * model.hidden
    dense = per_stage * layer_dense + embedding
    experts = per_stage * expert / par.ep / t
    return dense, experts, layer_dense + expert / par.ep / t


def _activation_bytes(model: Transformer, par: Parallel, sp: bool, flash: bool = False) -> tuple[float, float]:
    """Bytes one layer keeps for one micro-batch until its backward, under the configuration's
    recomputation, and the extra bytes the layer being recomputed needs at once (Korthikanti et al.
    2022, Table 2: ``s·b·h·(34 + 5·a·s/h)`` without parallelism or recomputation; ``flash``: a
    fused attention kernel keeps no scores)."""
    t, b, s, h = par.tp, par.micro_batch, model.seq, model.hidden
    n, k = b * s, model.top_k
    # Layer norm inputs (4), QKV and MLP inputs (2 + 2), dropout masks (1 + 1): whole on every TP rank
    # unless sequence parallel splits them.
    replicated = 10 * n * h / (t if sp else 1)
    # Q, K, V and the projection's input; the MLP's inner tensors (2 or 3 of them, per routed copy).
    sharded = (2 + 2 * model.kv / model.heads) * 2 * n * h / t
    sharded += 2 * model.mlp_matrices * n * model.ffn_size * k / t
    scores = 0.0 if flash else 5 * b * model.heads * s * s / t
    full_layer = replicated + sharded + scores
    if par.recompute == "full":
        return 2 * n * h / (t if sp else 1), full_layer
    if par.recompute == "selective":
        return replicated + sharded, scores
    return full_layer, 0.0


def simulate(model: Transformer, par: Parallel, cluster: Cluster, stack: Stack = IN_SAMPLE) -> SimResult:
    """One training step of ``model`` split as ``par`` on ``cluster``: its seconds, its per-GPU peak
    memory, the FLOP/s it achieves, and where the time goes; ``stack``: where the ground truth
    differs from these formulas (``bench.sim.stack``; the in-sample model by default)."""
    reason = invalid(model, par, cluster)
    if reason:
        return SimResult(status="invalid", reason=reason)
    gpu = cluster.gpu
    t, p, d, v, m = par.tp, par.pp, par.dp, par.vpp, par.micro_batches
    b, s, h, per_stage = par.micro_batch, model.seq, model.hidden, model.layers // par.pp
    n, sp = b * s, par.sequence_parallel and t > 1

    # Compute of one micro-batch on the slowest stage (the last: its layers, then logits and loss).
    layer = _layer_forward(model, par, gpu, sp, stack)
    recomputed = {"none": 0.0, "selective": layer.core, "full": layer.forward}[par.recompute]
    logits = ((1 + BWD_GEMM) * _gemm_s(gpu, n, model.vocab / t, h, stack)
              + _mem_s(gpu, LOSS_BYTES * n * model.vocab / t, stack))
    backward = per_stage * (layer.backward + recomputed)
    per_micro = per_stage * layer.forward + backward + logits
    # Tensor parallel: two all-reduces of n·h in the forward, two in the backward, two more when the
    # forward is recomputed; sequence parallel's all-gathers and reduce-scatters move the same bytes.
    tp_each = _ring_s(2 * n * h, t, cluster.ring_bw(t, 1), 2, stack)
    collectives = 6 if par.recompute == "full" else 4  # per layer and micro-batch
    tp_per_micro = per_stage * collectives * tp_each
    ep_per_micro = 0.0
    if model.moe:
        tokens = n / t if sp else n
        a2a = _ring_s(2 * tokens * model.top_k * h, par.ep, cluster.ring_bw(par.ep, t), 1, stack)
        ep_per_micro = per_stage * collectives * a2a

    # Pipeline: the 1F1B bubble is (p-1)/(v·m) of the compute (Narayanan et al. 2021), and each of the v·m
    # chunks sends activations forward and gradients back, each of the t ranks its 1/t over its own link.
    bubble = (p - 1) / v * (per_micro + tp_per_micro + ep_per_micro)
    pp_comm = 0.0
    if p > 1:
        send = 2 * n * h / t / (cluster.ring_bw(2, t * d) * COMM_EFF * stack.k("comm_eff")) + COLLECTIVE_LATENCY
        pp_comm = 2 * (v * m + p - 1) * send

    dense, experts, layer_params = _stage_params(model, par)
    # Data parallel. ZeRO 0-1: one all-reduce of the gradients (ZeRO-1: a reduce-scatter and an all-gather,
    # the same bytes), hidden partly behind the last micro-batch's backward. ZeRO-2: partitioned gradients
    # are reduce-scattered after every micro-batch's backward, the weights all-gathered once after the step.
    # ZeRO-3: the weights are also gathered for every micro-batch's forward and backward (and recomputation).
    grads = GRAD_COMM_BYTES * dense, GRAD_COMM_BYTES * experts
    weights = WEIGHT_BYTES * dense, WEIGHT_BYTES * experts
    overlap = min(1.0, DP_OVERLAP * stack.k("dp_overlap"))
    if par.zero <= 1:
        dp_raw, hide = _over_dp(cluster, par, *grads, 2, stack), overlap * backward
    elif par.zero == 2:
        dp_raw = m * _over_dp(cluster, par, *grads, 1, stack) + _over_dp(cluster, par, *weights, 1, stack)
        hide = overlap * m * backward
    else:
        gathers = 3 if par.recompute == "full" else 2
        dp_raw = m * (_over_dp(cluster, par, *grads, 1, stack) + gathers * _over_dp(cluster, par, *weights, 1, stack))
        hide = overlap * m * per_micro
    dp_comm = max(0.0, dp_raw - hide)
    stepped = dense / d + experts / (d // par.ep) if par.zero >= 1 else dense + experts
    optimizer = _mem_s(gpu, OPTIMIZER_BYTES * stepped, stack)
    breakdown = Breakdown(compute=m * per_micro, bubble=bubble, tp_comm=m * tp_per_micro, dp_comm=dp_comm,
                          pp_comm=pp_comm, ep_comm=m * ep_per_micro, optimizer=optimizer)
    step = breakdown.total

    memory = _memory(model, par, dense, experts, layer_params, sp, stack)
    tokens = par.global_batch * s
    gemm, core, logit = model.flops_per_token()
    model_flops = 3 * tokens * (model.layers * (gemm + core) + logit)
    extra = {"none": 0.0, "selective": core, "full": gemm + core}[par.recompute]
    hardware_flops = model_flops + tokens * model.layers * extra
    state = memory.weights + memory.grads + memory.optimizer
    nodes = math.ceil(cluster.gpus / cluster.gpus_per_node)
    startup = (STARTUP_BASE_S * stack.k("startup_base_s") + STARTUP_PER_DOUBLING_S * math.log2(cluster.gpus)
               + STARTUP_PER_GB_S * state / 1e9 + stack.startup_per_node_s * nodes)
    peak = memory.total
    usable = gpu.hbm_bytes * stack.usable_share(repr(par))
    fits = peak <= usable
    return SimResult(
        status="ok" if fits else "oom",
        reason="" if fits else f"needs {peak / GIB:.1f} GiB per GPU, over {usable / GIB:.1f} GiB usable",
        step_s=step, peak_bytes=peak, tflops_per_gpu=hardware_flops / step / cluster.gpus / 1e12,
        mfu=model_flops / step / cluster.gpus / gpu.peak_flops, startup_s=startup, breakdown=breakdown,
        memory=memory)


def _memory(model: Transformer, par: Parallel, dense: float, experts: float, layer_params: float,
            sp: bool, stack: Stack = IN_SAMPLE) -> Memory:
    """Peak bytes on the first stage's GPU, which holds the most micro-batches in flight (with p > 1 the
    last stage holds one, plus the logits; the larger of the two is returned). The stack's allocator
    slack grows the activations with their largest tensor (a micro-batch's logits, in GiB); its NCCL
    buffers are per communicator group."""
    d, p, v, m = par.dp, par.pp, par.vpp, par.micro_batches
    expert_dp = d // par.ep
    params = dense + experts
    zero_params = dense / d + experts / expert_dp
    weights = WEIGHT_BYTES * (zero_params + 2 * layer_params if par.zero == 3 else params)
    grads = GRAD_BYTES * (zero_params if par.zero >= 2 else params)
    optimizer = OPTIMIZER_STATE_BYTES * (zero_params if par.zero >= 1 else params)
    kept, working = _activation_bytes(model, par, sp, stack.flash_attention)
    per_stage = model.layers // p
    # 1F1B: the first stage holds min(m, p) micro-batches; interleaving holds 1 + (p-1)/(p·v) times more.
    in_flight = min(m, p) * (1 + (p - 1) / (p * v) if v > 1 else 1)
    first = per_stage * kept * in_flight + working
    logits = 6 * par.micro_batch * model.seq * model.vocab / par.tp  # bf16 logits and their fp32 copy
    last = per_stage * kept + working + logits
    activations = max(first, last) if p > 1 else first + logits
    activations *= 1 + stack.fragmentation * min(1.0, logits / GIB)
    groups = sum(degree > 1 for degree in (par.tp, par.pp, par.dp, par.ep))
    return Memory(weights=weights, grads=grads, optimizer=optimizer, activations=activations,
                  overhead=FRAMEWORK_BYTES * stack.k("framework_bytes") + stack.comm_buffer_bytes * groups)
