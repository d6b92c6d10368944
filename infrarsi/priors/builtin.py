"""The built-in prior table: what an experienced infra engineer believes before measuring.

Entries are by knob ROLE (resolved to the contract's knob names and domains), with separate CPU
and CUDA beliefs where they differ. Every entry names its source. "This project's measurements"
are docs/measured.md (2-core AVX2 CPU, small GPT). A patch declares its own belief (``Patch.prior``,
a role's level where the patch sets one: ``Levels.beliefs``); it reaches the table through
``PriorContext.patches`` (``patches.declared_priors``).

Some beliefs are deliberately the common ones even where this project measured otherwise
(bf16 on a CPU without bf16 units): the point of the system is that live trials correct a prior,
and flag it as miscalibrated, rather than that the table is tuned to one machine.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from infrarsi.contract import Contract, Knob, KnobValue
from infrarsi.priors.attention_core import SELECTIVE_TIME_SD, selective_time
from infrarsi.priors.memory_parts import (
    PartEffect,
    in_flight,
    part_effect,
    recompute_level,
    sharding_stage,
    value_ratio,
)
from infrarsi.priors.tensor_parallel import SPLIT_TIME_SD, SPLIT_TIME_SD_PER_OCTAVE, split_time
from infrarsi.priors.types import (
    BASELINE_SD,
    Prior,
    PriorContext,
    PriorResult,
    PriorStatus,
    PriorTable,
    patch_key,
    setting_key,
)

if TYPE_CHECKING:  # importing it imports torch; the table only reads device and core count
    from infrarsi.records.hardware import HardwareFingerprint as Hardware


@dataclass(frozen=True, slots=True)
class Effect:
    """Log effects on step time and peak memory, with sds; start-up seconds added."""

    time: float
    time_sd: float
    mem: float
    mem_sd: float
    startup_s: float = 0.0

    def minus(self, other: Effect) -> Effect:
        """This level relative to ``other`` (both relative to the same reference)."""
        return Effect(self.time - other.time, math.hypot(self.time_sd, other.time_sd),
                      self.mem - other.mem, math.hypot(self.mem_sd, other.mem_sd),
                      max(self.startup_s - other.startup_s, 0.0))


REFERENCE = Effect(0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True, slots=True)
class Belief:
    """An effect on one device kind, believed before any trial has run, and who says so."""

    effect: Effect
    source: str

# ---------------------------------------------------------------- categorical roles


def _switch(value: KnobValue) -> str | None:
    """on / off for boolean-like values; modes such as ``max-autotune`` count as on."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float):
        return "on" if value else "off"
    text = value.strip().lower()
    if text in ("", "0", "false", "off", "no", "none", "disable", "disabled"):
        return "off"
    return "on"


def _alias(table: dict[str, tuple[str, ...]]) -> Callable[[KnobValue, Hardware], str | None]:
    lookup = {alias: level for level, aliases in table.items() for alias in aliases}

    def canon(value: KnobValue, hw: Hardware) -> str | None:
        text = value.lower() if isinstance(value, str) else _switch(value)
        # "for-loop", "for loop" and "for_loop" are one spelling to the table.
        return lookup.get(text.strip().replace("-", "_").replace(" ", "_")) if text is not None else None

    return canon


def _optimizer_canon(value: KnobValue, hw: Hardware) -> str | None:
    # torch.optim picks foreach by default when every parameter is on CUDA, the for-loop on CPU.
    if isinstance(value, str) and value.strip().lower() in ("default", "auto"):
        return "foreach" if hw.device == "cuda" else "for_loop"
    return _alias({"for_loop": ("for_loop", "loop", "single_tensor", "off", "none"),
                   "foreach": ("foreach", "multi_tensor", "on"), "fused": ("fused",)})(value, hw)


@dataclass(frozen=True, slots=True)
class Levels:
    """A categorical role: each level's effect relative to the reference level, per device."""

    canon: Callable[[KnobValue, Hardware], str | None]
    cpu: dict[str, Effect]
    cuda: dict[str, Effect]
    source_cpu: str
    source_cuda: str

    def levels(self, hw: Hardware, contract: Contract) -> dict[str, Effect]:
        return self.cuda if hw.device == "cuda" else self.cpu

    def effect(self, knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> Effect | None:
        levels = self.levels(hw, contract)
        a, b = self.canon(value, hw), self.canon(knob.default, hw)
        if a not in levels or b not in levels:
            return None
        return levels[a].minus(levels[b])

    def source(self, hw: Hardware) -> str:
        return self.source_cuda if hw.device == "cuda" else self.source_cpu

    def beliefs(self, level: str) -> dict[str, Belief]:
        """``level`` against the reference level on each device kind: what a patch that sets it declares."""
        return {"cpu": Belief(self.cpu[level], self.source_cpu), "cuda": Belief(self.cuda[level], self.source_cuda)}


def _on_off(value: KnobValue, hw: Hardware) -> str | None:
    return _switch(value)


class Recomputation(Levels):
    """On a GPU, selective recomputation's time from the model's shape where the contract holds it
    (``attention_core.selective_time``): 16 % of a step at 4,096 tokens of a 4,096-wide model, where
    the table's 3 % holds for wide models at short sequences. Full recomputation recomputes the
    attention core too: its time stays the table's above selective's."""

    def levels(self, hw: Hardware, contract: Contract) -> dict[str, Effect]:
        levels = super().levels(hw, contract)
        time = selective_time(contract) if hw.device == "cuda" else None
        if time is None:
            return levels
        selective, on = levels["selective"], levels["on"]
        return {**levels, "selective": replace(selective, time=time, time_sd=SELECTIVE_TIME_SD),
                "on": replace(on, time=time + on.time - selective.time)}


CHECKPOINTING = Recomputation(
    lambda value, hw: recompute_level(value),
    cpu={"off": REFERENCE, "selective": Effect(0.03, 0.06, -0.03, 0.06), "on": Effect(0.17, 0.08, -0.12, 0.10)},
    cuda={"off": REFERENCE, "selective": Effect(0.03, 0.05, -0.27, 0.20), "on": Effect(0.25, 0.08, -0.45, 0.25)},
    source_cpu="Chen et al. 2016 'Training Deep Nets with Sublinear Memory Cost': one extra forward "
               "(+20-33% compute); this project's measurements on CPU: +18% time, -11% peak RSS "
               "(the torch runtime is a large share of RSS, so the saving is smaller than on a GPU); "
               "selective recomputation (the attention core only) as on a GPU, its saving smaller "
               "at the short sequences a CPU runs",
    source_cuda="Chen et al. 2016 'Training Deep Nets with Sublinear Memory Cost' and the PyTorch "
                "torch.utils.checkpoint docs: recompute costs one extra forward (+20-33% step time) "
                "and frees most stored activations, the bulk of device memory for transformers; "
                "Korthikanti et al. 2022 'Reducing Activation Recomputation in Large Transformer Models' "
                "(Tables 2, 4): selective recomputation of the attention core frees its 5as/h of the "
                "34 + 5as/h bytes per token and hidden unit for 2-4% more time (+6.6% for the 22B "
                "model at 2,048 tokens; from the model's shape where known: infrarsi/priors/attention_core.py)",
)
COMPILE = Levels(
    _on_off,
    cpu={"off": REFERENCE, "on": Effect(0.0, 0.08, 0.35, 0.20, startup_s=40.0)},
    cuda={"off": REFERENCE, "on": Effect(-0.25, 0.15, -0.10, 0.15, startup_s=60.0)},
    source_cpu="this project's measurements: inductor on a matmul-bound CPU step gives no steady-state "
               "gain; cold compile 33-42 s of start-up, to be amortized over the job; the process tree's "
               "RSS grows by the compile worker processes (every compile trial of the MoE fixture hit "
               "its 685 MiB budget from a 0.55 GiB baseline)",
    source_cuda="PyTorch 2.0 release notes: torch.compile trained 163 open-source models 1.3-2x faster "
                "on A100 (geomean ~1.4x); fusion also trims activation memory; compile takes "
                "tens of seconds to minutes at start-up",
)
DTYPE = Levels(
    _alias({"fp32": ("fp32", "float32", "f32", "float", "torch.float32", "32", "off"),
            "bf16": ("bf16", "bfloat16", "torch.bfloat16", "amp_bf16"),
            "fp16": ("fp16", "float16", "half", "torch.float16", "16", "amp_fp16"),
            "tf32": ("tf32", "tensorfloat32")}),
    cpu={"fp32": REFERENCE, "bf16": Effect(-0.30, 0.30, 0.0, 0.40), "fp16": Effect(0.50, 0.50, 0.0, 0.40),
         "tf32": Effect(0.0, 0.05, 0.0, 0.03)},
    cuda={"fp32": REFERENCE, "bf16": Effect(-0.60, 0.25, -0.30, 0.20), "fp16": Effect(-0.60, 0.25, -0.30, 0.20),
          "tf32": Effect(-0.30, 0.25, 0.0, 0.03)},
    source_cpu="common belief, moderate confidence: bf16 autocast is faster on CPUs with bf16 units "
               "(Intel AMX / AVX512-BF16 extension docs report 1.3-2x), fp16 compute is poorly supported "
               "on CPUs. Known miscalibration: this project measured bf16 ~20x slower on a CPU without "
               "bf16 units; live trials are expected to correct this prior. Memory either way: under "
               "CPU autocast this project measured the process's peak RSS 10% lower on the dense GPT "
               "fixture and 115% higher on the MoE fixture (its per-expert casts)",
    source_cuda="Micikevicius et al. 2018 'Mixed Precision Training' and NVIDIA tensor-core docs: "
                "16-bit matmuls ~2x faster end to end, activations stored in half the bytes; TF32: "
                "NVIDIA A100 whitepaper (tensor-core fp32 matmuls, no memory change)",
)
OPTIMIZER = Levels(
    _optimizer_canon,
    cpu={"for_loop": REFERENCE, "foreach": Effect(-0.02, 0.04, 0.01, 0.03), "fused": Effect(-0.03, 0.05, 0.0, 0.03)},
    cuda={"for_loop": REFERENCE, "foreach": Effect(-0.06, 0.05, 0.02, 0.03), "fused": Effect(-0.09, 0.06, 0.0, 0.03)},
    source_cpu="PyTorch torch.optim docs (foreach/fused implementations batch the per-parameter updates); "
               "this project's measurements: AdamW variant within noise on a small CPU GPT",
    source_cuda="PyTorch torch.optim docs: foreach (default on CUDA) and fused kernels cut per-parameter "
                "kernel launches; the optimizer step is typically 5-15% of a step; foreach keeps "
                "temporary lists of tensors (slightly more memory)",
)
ATTENTION = Levels(
    _alias({"manual": ("manual", "math", "eager", "naive", "vanilla", "off"),
            "sdpa": ("sdpa", "flash", "flash_attention", "efficient", "mem_efficient", "on")}),
    cpu={"manual": REFERENCE, "sdpa": Effect(-0.03, 0.06, -0.05, 0.10)},
    cuda={"manual": REFERENCE, "sdpa": Effect(-0.25, 0.20, -0.30, 0.25)},
    source_cpu="PyTorch scaled_dot_product_attention docs (fused CPU kernel); this project's measurements: "
               "manual vs SDPA within noise at T=128, the gain grows with sequence length",
    source_cuda="Dao et al. 2022 'FlashAttention': 2-4x faster attention and no TxT score matrix in memory; "
                "attention is a fraction of the step, so ~15-30% end to end at moderate T",
)
MOE_DISPATCH = Levels(
    _alias({"loop": ("loop", "for_loop", "sequential", "off"),
            "batched": ("batched", "grouped", "padded", "bmm", "grouped_mm", "on")}),
    cpu={"loop": REFERENCE, "batched": Effect(-0.15, 0.30, 0.05, 0.15)},
    cuda={"loop": REFERENCE, "batched": Effect(-0.40, 0.30, 0.05, 0.15)},
    source_cpu="this project's measurements: with balanced routing the per-expert loop costs 1.07-1.71x "
               "the batched version at 128 tokens per expert, ~1.0-1.2x at 2048; with a collapsed "
               "router padded dispatch is slower (wide sd)",
    source_cuda="Gale et al. 2023 'MegaBlocks' and Fedus et al. 2022 'Switch Transformers': per-expert "
                "Python loops leave the GPU idle between small kernels; batched dispatch pads tokens "
                "(some extra memory)",
)
ZERO_GRAD = Levels(
    _alias({"zero": ("zero", "zeros", "false", "off"), "none": ("none", "set_to_none", "true", "on")}),
    cpu={"zero": REFERENCE, "none": Effect(-0.01, 0.02, -0.02, 0.04)},
    cuda={"zero": REFERENCE, "none": Effect(-0.02, 0.03, -0.05, 0.05)},
    source_cpu="PyTorch Optimizer.zero_grad docs: set_to_none skips a memset and frees gradient memory "
               "between steps; this project's measurements: within noise on CPU",
    source_cuda="PyTorch Optimizer.zero_grad docs and the PyTorch performance tuning guide: "
                "set_to_none lowers the memory footprint and modestly improves performance",
)


def _zero_stage(value: KnobValue, hw: Hardware) -> str | None:
    """ZeRO's stages by their communication: none, the optimizer's state only (stage 1), the
    gradients too (2, FSDP's SHARD_GRAD_OP), the parameters too (3, FULL_SHARD)."""
    return {"0": "off", "1": "optimizer", "2": "partial", "3": "full"}.get(sharding_stage(value) or "")


FSDP = Levels(
    _zero_stage,
    cpu={"off": REFERENCE, "optimizer": Effect(0.05, 0.10, -0.05, 0.20), "partial": Effect(0.10, 0.15, -0.10, 0.25),
         "full": Effect(0.15, 0.15, -0.20, 0.30)},
    # Stages 1 and 2 move the bytes data parallelism's all-reduce does; stage 3 gathers the
    # parameters again, 1.5 times them (Rajbhandari et al. 2020, Section 7).
    cuda={"off": REFERENCE, "optimizer": Effect(0.0, 0.05, -0.15, 0.20), "partial": Effect(0.02, 0.06, -0.25, 0.20),
          "full": Effect(0.10, 0.10, -0.40, 0.30)},
    source_cpu="Zhao et al. 2023 'PyTorch FSDP': sharding trades extra all-gathers for memory; over gloo on "
               "CPU the communication is relatively expensive and RSS is dominated by the runtime",
    source_cuda="Zhao et al. 2023 'PyTorch FSDP' and Rajbhandari et al. 2020 'ZeRO': sharding parameters, "
                "gradients and optimizer state divides their memory by the world size for ~5-10% more time",
)
GRAD_AS_BUCKET_VIEW = Levels(
    _on_off,
    cpu={"off": REFERENCE, "on": Effect(0.0, 0.03, -0.03, 0.04)},
    cuda={"off": REFERENCE, "on": Effect(-0.01, 0.02, -0.08, 0.06)},
    source_cpu="PyTorch DistributedDataParallel docs (gradients become views into the buckets, saving one "
               "gradient-sized copy); this project's measurements: no time effect beyond noise over gloo",
    source_cuda="PyTorch DistributedDataParallel docs: gradient_as_bucket_view saves memory equal to the "
                "total gradient size and one copy per step",
)
STATIC_GRAPH = Levels(
    _on_off,
    cpu={"off": REFERENCE, "on": Effect(0.0, 0.03, 0.0, 0.02)},
    cuda={"off": REFERENCE, "on": Effect(-0.02, 0.03, 0.0, 0.02)},
    source_cpu="PyTorch DistributedDataParallel docs (static_graph skips unused-parameter search); "
               "negligible on small CPU models",
    source_cuda="PyTorch DistributedDataParallel docs: static_graph lets DDP skip per-iteration graph "
                "traversal and enables optimizations; small gains",
)
CUDNN_BENCHMARK = Levels(
    _on_off,
    cpu={"off": REFERENCE, "on": Effect(0.0, 0.02, 0.0, 0.02)},
    cuda={"off": REFERENCE, "on": Effect(-0.05, 0.08, 0.03, 0.05, startup_s=2.0)},
    source_cpu="PyTorch torch.backends.cudnn docs: cuDNN autotuning has no effect without a GPU",
    source_cuda="PyTorch performance tuning guide: cudnn.benchmark picks the fastest convolution "
                "algorithm per input shape (gains on conv nets with fixed shapes, a few seconds of "
                "tuning at start-up, workspaces may take more memory)",
)
MATMUL_PRECISION = Levels(
    _on_off,
    cpu={"off": REFERENCE, "on": Effect(0.0, 0.03, 0.0, 0.02)},
    cuda={"off": REFERENCE, "on": Effect(-0.20, 0.20, 0.0, 0.02)},
    source_cpu="PyTorch set_float32_matmul_precision docs: TF32 is a tensor-core format; on CPU "
               "'high' may use bf16 passes only where oneDNN supports them, usually no change",
    source_cuda="NVIDIA A100 whitepaper and PyTorch TF32 notes: float32 matmuls on tensor cores, "
                "several times faster matmuls, no memory change",
)
ALLOCATOR = Levels(
    _on_off,
    cpu={"off": REFERENCE, "on": Effect(0.0, 0.01, 0.0, 0.01)},
    cuda={"off": REFERENCE, "on": Effect(0.0, 0.03, -0.05, 0.08)},
    source_cpu="PyTorch CUDA memory-management docs: the caching allocator's settings apply to CUDA only",
    source_cuda="PyTorch CUDA memory-management docs: expandable_segments reduces fragmentation, so "
                "reserved memory tracks allocated memory more closely (lower peak, same speed)",
)

# ---------------------------------------------------------------- ratio roles


FILLED_TOKENS = 1024
"""Rows (tokens) a micro-batch's GEMMs need to fill a GPU's tensor cores: at a transformer's widths a
GEMM of a thousand rows or more runs near peak (NVIDIA's matrix-multiplication performance guide), so
past them a bigger micro-batch gains in proportion less (docs/benchmarks.md, "Activations from the
model's shape")."""


def batch_effect(r: float, device: str, tokens: int = 0) -> Effect:
    """Micro-batch scaled by r at a fixed global batch: bigger kernels, more activations.
    ``tokens``: the default micro-batch's tokens, where known."""
    lr = math.log(r)
    cuda = device == "cuda"
    # Smaller micro-batches cost as much on a CPU as on a GPU: per-op overhead and small GEMMs
    # (docs/measured.md, "Micro-batch on CPU": 0.29-0.73 log slower per log-ratio below the default).
    slope = 0.30 if r < 1 else (0.12 * min(1.0, FILLED_TOKENS / tokens) if cuda and tokens else
                                0.12 if cuda else 0.05)
    act_share = 0.6 if cuda else 0.3  # activations' share of peak memory at the default micro-batch
    return Effect(-slope * lr, 0.05 + 0.08 * abs(lr),
                  math.log(1 - act_share + act_share * r), 0.05 + 0.15 * abs(lr))


def _micro_batch(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> Effect | None:
    r, default = value_ratio(knob, value), _number(knob.default)
    tokens = int(default * contract.workload.seq_len) if default and default > 0 else 0
    return None if r is None else batch_effect(r, hw.device, tokens)


def _grad_accum(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> Effect | None:
    r = value_ratio(knob, value)
    if r is None:
        return None
    if contract.by_role("micro_batch"):
        # The micro-batch knob's prior carries the effect of the coupled pair; accumulation itself
        # only adds a loop iteration per micro-step.
        return Effect(0.0, 0.03, 0.0, 0.03)
    return batch_effect(1 / r, hw.device)


def _number(value: KnobValue) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _baseline(contract: Contract, role: str) -> float:
    """The baseline's value of the knob with ``role`` (0 when the job has none or it is not a number)."""
    return next((n for k in contract.by_role(role) if (n := _number(k.default)) is not None), 0.0)


def _cpu_threads(ranks: float, threads: float, cores: int) -> float:
    """Compute threads the job's processes run: a non-positive count keeps torch's default, one per
    core in a lone process and one per rank under torchrun (it sets OMP_NUM_THREADS=1)."""
    ranks = max(ranks, 1.0)
    return ranks * (threads if threads > 0 else (cores if ranks == 1 else 1))


def _oversubscribed(v: float, d: float, cores: int) -> int:
    """+1: this value runs more threads than cores and the default does not; -1: the reverse."""
    return int(v > cores) - int(d > cores)


def _threads(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> Effect | None:
    threads, default = _number(value), _number(knob.default)
    if threads is None or default is None:
        return None
    cores = hw.cpu_cores
    # Threads per rank: every rank of the baseline's launch runs this many.
    ranks = _baseline(contract, "nproc_per_node")
    v, d = _cpu_threads(ranks, threads, cores), _cpu_threads(ranks, default, cores)
    slope, penalty = (0.05, 0.2) if hw.device == "cuda" else (0.80, 0.7)
    over = _oversubscribed(v, d, cores)
    return Effect(-slope * math.log(min(v, cores) / min(d, cores)) + over * penalty,
                  0.10 + 0.10 * abs(math.log(v / d)) + (0.3 if over else 0.0), 0.0, 0.03)


def _workers(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> Effect | None:
    if isinstance(value, bool) or not isinstance(value, int) or not isinstance(knob.default, int):
        return None
    w, d = value, knob.default
    if hw.device == "cuda":
        overlap = -0.05 if (w > 0) != (d > 0) else 0.0
        return Effect(overlap if w > d else -overlap, 0.10, 0.0, 0.03)
    return Effect(0.02 * (w - d), 0.10, math.log((1 + 0.25 * w) / (1 + 0.25 * d)), 0.20)


def _bucket(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> Effect | None:
    r = value_ratio(knob, value)
    if r is None:
        return None
    return Effect(-0.01 * math.log(r) if hw.device == "cuda" else 0.0, 0.03 + 0.02 * abs(math.log(r)), 0.0, 0.03)


def _nproc(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> Effect | None:
    r = value_ratio(knob, value)
    if r is None:
        return None
    lr = math.log(r)
    if hw.device == "cuda":
        return Effect(-0.85 * lr, 0.20 + 0.10 * abs(lr), 0.0, 0.15)
    startup = 3.3 if r > 1 else 0.0
    # Every rank runs the baseline's threads per rank: the compute threads move as with the
    # threads knob (_threads), plus a process's overhead per rank.
    threads, cores, d = _baseline(contract, "threads"), hw.cpu_cores, float(knob.default)
    v_threads, d_threads = _cpu_threads(r * d, threads, cores), _cpu_threads(d, threads, cores)
    over = _oversubscribed(v_threads, d_threads, cores)
    compute = -0.80 * math.log(min(v_threads, cores) / min(d_threads, cores))
    return Effect(compute + 0.10 * abs(lr) + 0.7 * over, 0.40 + (0.3 if over else 0.0), lr, 0.20, startup_s=startup)


def _logging(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> Effect | None:
    r = value_ratio(knob, value)
    if r is None:
        return None
    # The log step's share of a step at the default interval, of which 1 - 1/r goes away.
    share = 0.02 if hw.device == "cuda" else 0.005
    return Effect(math.log(1 - share * (1 - 1 / r)), share + 0.01, 0.0, 0.01)


# ---------------------------------------------------------------- parallel layouts
# docs/sim.md prices the same layouts from the papers cited below (its "The model" section).

NODE_GPUS = 8
"""GPUs one NVLink domain joins (an HGX/DGX node); a group wider than that talks over the network."""
UNSPLIT_ACTIVATIONS = 0.10
"""Share of peak that tensor parallelism leaves whole without sequence parallelism: the layer norms'
and dropouts' activations, 10 of the 34 bytes per token and hidden unit (Korthikanti et al. 2022)."""


@dataclass(frozen=True, slots=True)
class Split:
    """A degree that splits the model over devices, on one device kind, per doubling of the degree."""

    share: float
    """Share of the baseline's peak memory the degree divides: at v/d = r the peak is 1 - share + share/r
    (the split shape of ``infrarsi.search.memory_curve``, which refits the share once a value runs)."""
    inside: float
    """Log step time per doubling inside a node..."""
    across: float
    """...and per doubling beyond one."""
    time_sd: float


NETWORK_SD = 0.15
"""Added to a degree's time sd per doubling beyond one node: a slower link is less known."""


def split_effect(value: float, default: float, split: Split, node_gpus: int) -> Effect:
    """The effect of ``value`` against the baseline's ``default`` degree."""
    octaves = math.log2(value / default)
    inside = math.log2(min(value, node_gpus) / min(default, node_gpus))
    beyond = math.log2(max(value, node_gpus) / max(default, node_gpus))
    network = NETWORK_SD * abs(beyond) if split.across > split.inside else 0.0
    return Effect(split.inside * inside + split.across * beyond, split.time_sd + 0.08 * abs(octaves) + network,
                  math.log1p(split.share * (default / value - 1)), 0.15 + 0.10 * abs(octaves))


def _node_gpus(hw: Hardware) -> int:
    # A machine with fewer GPUs than a DGX node is its own NVLink domain.
    return min(hw.gpu_count, NODE_GPUS) if hw.gpu_count else NODE_GPUS


def _on(contract: Contract, role: str) -> bool:
    """Whether the baseline switches on a knob with ``role``."""
    return any(_switch(k.default) == "on" for k in contract.by_role(role))


def _degree(cpu: Split, cuda: Split) -> Callable[[Knob, KnobValue, Hardware, Contract], Effect | None]:
    def rule(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> Effect | None:
        r = value_ratio(knob, value)
        if r is None:
            return None
        split = cuda if hw.device == "cuda" else cpu
        if knob.role == "tensor_parallel" and not _on(contract, "sequence_parallel"):
            split = replace(split, share=split.share - UNSPLIT_ACTIVATIONS)
        effect = split_effect(float(value), float(knob.default), split, _node_gpus(hw))
        if knob.role == "tensor_parallel" and hw.device == "cuda":
            return _priced_tensor_parallel(effect, float(value), float(knob.default), split, hw, contract)
        return effect

    return rule


def _priced_tensor_parallel(effect: Effect, value: float, default: float, split: Split, hw: Hardware,
                            contract: Contract) -> Effect:
    """``effect`` with its time inside the NVLink domain priced from the model's shape and the GPU's
    datasheet (``tensor_parallel.split_time``) where both are known; beyond the domain the table's."""
    node = _node_gpus(hw)
    inside = split_time(contract, hw, min(value, node), min(default, node))
    if inside is None:
        return effect
    beyond = math.log2(max(value, node) / max(default, node))
    octaves = abs(math.log2(value / default))
    sd = math.hypot(SPLIT_TIME_SD + SPLIT_TIME_SD_PER_OCTAVE * octaves, NETWORK_SD * abs(beyond))
    return replace(effect, time=inside + split.across * beyond, time_sd=sd)


IN_FLIGHT_SHARE = 0.2
"""Share of a pipeline stage's peak that its in-flight activations take (recomputation keeps it small)."""


def _in_flight(stages: float) -> float:
    """Log peak of ``stages`` interleaved stages per rank against none: the in-flight activations
    (``memory_parts.in_flight``) at their share of the peak, so interleaving costs most at 2 stages."""
    return math.log1p(IN_FLIGHT_SHARE * (in_flight(stages) - 1))


def _virtual_pipeline(knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> Effect | None:
    r = value_ratio(knob, value)
    if r is None:
        return None
    octaves = math.log2(r)
    # More stages per rank shrink the pipeline bubble (p-1)/(v·m) for more point-to-point sends.
    time = -0.03 if hw.device == "cuda" else 0.0
    mem = _in_flight(float(value)) - _in_flight(float(knob.default))
    return Effect(time * octaves, 0.04 + 0.03 * abs(octaves), mem, 0.04 + 0.03 * abs(octaves))


SEQUENCE_PARALLEL = Levels(
    _on_off,
    cpu={"off": REFERENCE, "on": Effect(0.0, 0.05, -0.03, 0.05)},
    cuda={"off": REFERENCE, "on": Effect(-0.04, 0.06, -0.12, 0.10)},
    source_cpu="Korthikanti et al. 2022 'Reducing Activation Recomputation in Large Transformer Models': "
               "the layer norms' and dropouts' activations split over the tensor-parallel ranks; on a CPU "
               "the runtime is a large share of RSS, so the saving is smaller",
    source_cuda="Korthikanti et al. 2022 'Reducing Activation Recomputation in Large Transformer Models' "
                "(Table 2, Section 4.2): the 10 of 34 bytes of activations per token and hidden unit that "
                "tensor parallelism leaves whole are split too, with the same bytes communicated (a "
                "reduce-scatter and an all-gather for each all-reduce) and the norms and dropouts "
                "computed on 1/t of the tokens: a few percent faster; nothing at tensor-parallel degree 1",
)


@dataclass(frozen=True, slots=True)
class Ratio:
    rule: Callable[[Knob, KnobValue, Hardware, Contract], Effect | None]
    source_cpu: str
    source_cuda: str

    def effect(self, knob: Knob, value: KnobValue, hw: Hardware, contract: Contract) -> Effect | None:
        return self.rule(knob, value, hw, contract)

    def source(self, hw: Hardware) -> str:
        return self.source_cuda if hw.device == "cuda" else self.source_cpu


ROLE_TABLE: dict[str, Levels | Ratio] = {
    "micro_batch": Ratio(
        _micro_batch,
        "this project's measurements: micro-batch 1 with accumulation is 1.36x slower than 16 on a "
        "small CPU GPT (slope ~0.11 per log-ratio); activations are ~30% of CPU peak RSS",
        "Goyal et al. 2017 'Accurate, Large Minibatch SGD' and the NVIDIA deep-learning performance "
        "guide: small per-GPU batches under-fill the device; activations dominate device memory "
        "and grow linearly with the micro-batch"),
    "grad_accum": Ratio(
        _grad_accum,
        "at a fixed global batch more accumulation means a smaller micro-batch (see micro_batch); "
        "when a micro-batch knob exists it carries the effect",
        "at a fixed global batch more accumulation means a smaller micro-batch (see micro_batch); "
        "when a micro-batch knob exists it carries the effect"),
    "threads": Ratio(
        _threads,
        "this project's measurements: 1 thread is 1.77x slower than 2 (slope ~0.8 per log-ratio up to "
        "the core count); oversubscribing the cores was catastrophic (3.4x, CV 0.35)",
        "PyTorch performance tuning guide: on GPU the CPU thread count only matters for host-side "
        "work; oversubscription still hurts the data pipeline"),
    "dataloader_workers": Ratio(
        _workers,
        "PyTorch DataLoader docs: each worker is a separate process (more RSS in the process tree); "
        "on a CPU-bound job workers compete with compute for the same cores",
        "PyTorch DataLoader docs and performance tuning guide: worker processes overlap loading with "
        "GPU compute; device memory is unaffected"),
    "ddp_bucket_mb": Ratio(
        _bucket,
        "this project's measurements: DDP bucket size has no effect beyond noise over gloo",
        "Li et al. 2020 'PyTorch Distributed' (VLDB): bucket size trades all-reduce launch overhead "
        "against overlap; the 25 MB default is near-optimal for most models"),
    "logging": Ratio(
        _logging,
        "a log line every N steps is one print and one loss read: on a CPU nothing runs ahead of the "
        "host, so a longer interval saves only the print (under 1% of a step); without this belief "
        "the search's neutral prior (sd 1.0 in log time) tried the interval before the knobs that matter",
        "a log line every N steps reads the loss, a host-device sync that stops the host from queuing "
        "ahead (PyTorch performance tuning guide: avoid unnecessary CPU-GPU synchronization): a few "
        "percent of a step at most"),
    "ddp_grad_as_bucket_view": GRAD_AS_BUCKET_VIEW,
    "ddp_static_graph": STATIC_GRAPH,
    "nproc_per_node": Ratio(
        _nproc,
        "this project's measurements: 2 ranks x 1 thread match 1 process x 2 threads, torchrun adds "
        "~3.3 s of start-up, each rank is a full process (RSS scales with ranks); oversubscription "
        "is catastrophic (wide sd)",
        "Li et al. 2020 'PyTorch Distributed' (VLDB): near-linear data-parallel scaling at a fixed "
        "global batch; per-device memory stays roughly constant"),
    "activation_checkpointing": CHECKPOINTING,
    "compile": COMPILE,
    "dtype": DTYPE,
    "optimizer_impl": OPTIMIZER,
    "attention_impl": ATTENTION,
    "moe_dispatch": MOE_DISPATCH,
    "zero_grad": ZERO_GRAD,
    "fsdp": FSDP,
    "tensor_parallel": Ratio(
        _degree(cpu=Split(share=0.3, inside=0.30, across=0.30, time_sd=0.25),
                cuda=Split(share=0.7, inside=0.12, across=0.40, time_sd=0.10)),
        "Narayanan et al. 2021 'Efficient Large-Scale Language Model Training on GPU Clusters Using "
        "Megatron-LM': each doubling of the tensor-parallel degree halves the weights, gradients, optimizer "
        "state and most activations per rank and adds all-reduces; over gloo on a CPU the all-reduces are "
        "relatively expensive and the runtime is a large share of RSS",
        "Narayanan et al. 2021 'Efficient Large-Scale Language Model Training on GPU Clusters Using "
        "Megatron-LM' (Sections 2.3, 3.2, 5.4) and Korthikanti et al. 2022 (Table 2): each doubling "
        "halves the weights, gradients and optimizer state per GPU (less under ZeRO, which already splits "
        "the optimizer state over the data-parallel ranks the degree takes) and the activations but the "
        "layer norms' and dropouts' without sequence parallelism: peak ~30-35% lower per doubling, "
        "1.6-1.7x per halving; it adds four all-reduces a layer and shrinks the GEMMs, so it is slower "
        "per doubling on NVLink and much slower across nodes (use the smallest degree that fits, within "
        "a node)"),
    "pipeline_parallel": Ratio(
        _degree(cpu=Split(share=0.3, inside=0.15, across=0.15, time_sd=0.20),
                cuda=Split(share=0.5, inside=0.05, across=0.05, time_sd=0.08)),
        "Narayanan et al. 2021 'Efficient Large-Scale Language Model Training on GPU Clusters Using "
        "Megatron-LM': each stage holds 1/p of the layers; on a CPU the runtime is a large share of RSS "
        "and each stage waits on the others",
        "Narayanan et al. 2021 'Efficient Large-Scale Language Model Training on GPU Clusters Using "
        "Megatron-LM' (Sections 2.2, 3.3, 5.4): each doubling halves the weights, gradients and optimizer "
        "state per GPU, while under 1F1B the first stage keeps p micro-batches of its l/p layers in "
        "flight, so activations stay: peak ~25% lower per doubling; the bubble (p-1)/(v·m) of the step grows and "
        "the point-to-point sends are small, so a little slower per doubling, also across nodes"),
    "virtual_pipeline": Ratio(
        _virtual_pipeline,
        "Narayanan et al. 2021 (Section 2.2.2): interleaved stages cut the pipeline bubble at the price "
        "of more point-to-point sends; on a CPU no measurement, the memory as on a GPU",
        "Narayanan et al. 2021 'Efficient Large-Scale Language Model Training on GPU Clusters Using "
        "Megatron-LM' (Section 2.2.2): v interleaved stages per rank divide the bubble (p-1)/m by v for "
        "v times the sends (a few percent faster per doubling); Korthikanti et al. 2022 (Section 4.2.3): "
        "the first stage keeps 1 + (p-1)/(p·v) times the activations in flight (more memory than no "
        "interleaving, most at 2 stages)"),
    "sequence_parallel": SEQUENCE_PARALLEL,
    "expert_parallel": Ratio(
        _degree(cpu=Split(share=0.3, inside=0.15, across=0.15, time_sd=0.20),
                cuda=Split(share=0.5, inside=0.02, across=0.25, time_sd=0.10)),
        "Lepikhin et al. 2021 'GShard' and Fedus et al. 2022 'Switch Transformers': each rank holds E/e "
        "experts; on a CPU the runtime is a large share of RSS and the all-to-alls run over gloo",
        "Lepikhin et al. 2021 'GShard', Fedus et al. 2022 'Switch Transformers' and Rajbhandari et al. 2022 "
        "'DeepSpeed-MoE': each doubling of the expert-parallel degree halves the experts (most of a MoE's "
        "parameters) a GPU holds with their gradients and optimizer state (less under ZeRO, Rajbhandari et "
        "al. 2020): peak ~25% lower per doubling; the token all-to-alls grow while the expert GEMMs get more tokens "
        "each, about even inside a node, slower when the all-to-all crosses nodes"),
    "cudnn_benchmark": CUDNN_BENCHMARK,
    "matmul_precision": MATMUL_PRECISION,
    "allocator": ALLOCATOR,
    "dataloader_pin_memory": Levels(
        _on_off,
        cpu={"off": REFERENCE, "on": Effect(0.0, 0.02, 0.0, 0.02)},
        cuda={"off": REFERENCE, "on": Effect(-0.03, 0.05, 0.01, 0.02)},
        source_cpu="PyTorch DataLoader docs: pinned memory only speeds host-to-GPU copies",
        source_cuda="PyTorch DataLoader docs and performance tuning guide: pinned host memory makes "
                    "host-to-device copies faster and asynchronous"),
}


def _prior(key: str, effect: Effect, source: str, part: PartEffect | None = None) -> Prior:
    prior = Prior(key=key, time_log_mean=effect.time, time_log_sd=max(effect.time_sd, BASELINE_SD),
                  mem_log_mean=effect.mem, mem_log_sd=max(effect.mem_sd, BASELINE_SD), source=source,
                  startup_s=effect.startup_s)
    if part is None:
        return prior
    return replace(prior, mem_part=part.part, mem_part_log_mean=part.log_mean,
                   mem_part_log_sd=max(part.log_sd, BASELINE_SD), mem_part_shared_sd=part.shared_sd)


def builtin_table(context: PriorContext) -> PriorTable:
    """Priors for every key of ``context`` the table has a belief about, and each patch's declared
    prior (others stay neutral)."""
    hw, contract = context.hardware, context.contract
    priors: list[Prior] = []
    for knob in contract.tunable:
        entry = ROLE_TABLE.get(knob.role)
        for value in [knob.default, *knob.domain]:
            key = setting_key(knob.name, value)
            part = part_effect(knob, value, hw, contract)
            if value == knob.default:
                priors.append(_prior(key, REFERENCE, "baseline: the contract's default", part))
            elif entry is not None and (effect := entry.effect(knob, value, hw, contract)) is not None:
                priors.append(_prior(key, effect, f"builtin {knob.role}/{hw.device}: {entry.source(hw)}", part))
    for name, declared in context.patches.items():
        key = patch_key(name)
        if declared is not None:
            priors.append(declared if declared.key == key else _rekey(declared, key))
    return PriorTable.of(priors)


def declared_prior(name: str, belief: Belief, device: str) -> Prior:
    """A patch's own belief on ``device`` (``Patch.prior``) as the prior for ``patch:<name>``."""
    return _prior(patch_key(name), belief.effect, f"builtin patch/{device}: {belief.source}")


def _rekey(prior: Prior, key: str) -> Prior:
    return Prior.from_dict({**prior.to_dict(), "key": key})


class BuiltinPriors:
    """The default provider: the table above, resolved against the contract. Never fails."""

    name = "builtin"

    def priors(self, context: PriorContext) -> PriorResult:
        return PriorResult(status=PriorStatus.OK, table=builtin_table(context), provider=self.name)
