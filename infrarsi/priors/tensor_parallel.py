"""What tensor parallelism's all-reduces cost against a layer's GEMMs, from the model's shape and the
GPU's datasheet (Narayanan et al. 2021, Sections 2.3 and 3.2).

A tensor-parallel rank runs 1/t of each layer's GEMMs, 72·h²·(1 + s/6h)/t FLOPs a token forward and
backward, and takes part in four all-reduces a layer (two forward, two backward; a reduce-scatter and
an all-gather each under sequence parallelism, the same bytes) of the token's h bf16 values, of which
a ring moves 2(t-1)/t. On a fixed number of GPUs the GEMMs' share of a step does not change with the
layout, so the all-reduces' time against it is what the degree changes: a share
2(t-1)·F / (9·h·B·(1 + s/6h)) of the layer's GEMM time, with F the GPU's bf16 peak and B its NVLink
bandwidth (collectives and GEMMs taken to reach like shares of their peaks). A 4,096-wide model at
4,096 tokens on H100s spends 10 % more per rank added, an 8,192-wide one on A100s 2.6 %: the
narrower the model and the faster the GPU against its links, the smaller the degree should be.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from infrarsi.contract import Contract
from infrarsi.datasheet import datasheet_entry

if TYPE_CHECKING:
    from infrarsi.records.hardware import HardwareFingerprint

SPLIT_TIME_SD = 0.06
"""Spread of the priced effect: overlap of the all-reduces with compute, the GEMMs' smaller tiles at a
high degree and the collectives' latency each move it by a few percent."""
SPLIT_TIME_SD_PER_OCTAVE = 0.03
"""...and per doubling of the degree away from the baseline's, as the table's own sd grows."""


def allreduce_share(contract: Contract, hw: HardwareFingerprint, degree: float) -> float | None:
    """The all-reduces' time over the layer's GEMM time at tensor-parallel ``degree`` inside one
    NVLink domain; None for a mixture of experts (an expert-parallel knob), or without the model's
    hidden size and sequence length, a GPU the datasheet lists with its bf16 peak, or a switched
    NVLink fabric it names."""
    if contract.by_role("expert_parallel"):
        return None  # a mixture of experts: its experts' GEMMs and all-to-alls are not in the contract
    w = contract.workload
    entry = datasheet_entry(hw.gpu_name) if hw.gpu_name else None
    if not (w.hidden and w.seq_len) or entry is None or entry.nvlink_gbs is None or "bf16" not in entry.tflops:
        return None
    flops_per_byte = entry.tflops["bf16"] * 1e12 / (entry.nvlink_gbs * 1e9)
    h, s = w.hidden, w.seq_len
    return 2 * (degree - 1) * flops_per_byte / (9 * h * (1 + s / (6 * h)))


def split_time(contract: Contract, hw: HardwareFingerprint, value: float, default: float) -> float | None:
    """Log step time at degree ``value`` against the baseline's ``default``, both inside one NVLink
    domain; None where ``allreduce_share`` has no answer."""
    at_value, at_default = allreduce_share(contract, hw, value), allreduce_share(contract, hw, default)
    if at_value is None or at_default is None:
        return None
    return math.log1p(at_value) - math.log1p(at_default)
