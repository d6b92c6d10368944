"""A workload's signature: what decides whether findings from one job carry over to another.

Jobs are alike when they have the same model family, similar size (log2 buckets of parameters,
tokens per optimizer step and sequence length), the same device kind and launcher. Buckets
make "a 4.2 M and a 4.9 M parameter GPT" the same workload, and similarity falls off with
the bucket distance, so a 2x larger model is still "similar" but ranks below an exact match.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from infrarsi.contract import Contract

UNKNOWN = -1
"""Bucket value when the size is unknown (no probe.model() call)."""
CROSS_DEVICE = 0.25
"""CPU and CUDA findings barely transfer: a cross-device match is never a default seed."""
CROSS_FAMILY = 0.5
CROSS_LAUNCHER = 0.7
BUCKET_SCALE = 3.0
"""Similarity falls by a factor e for every 3 buckets (8x) of summed size difference."""


def _bucket(value: float | None) -> int:
    return round(math.log2(value)) if value and value > 0 else UNKNOWN


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkloadSignature:
    family: str
    """dense | moe | unknown."""
    params_bucket: int
    """round(log2(parameters)); UNKNOWN when not reported."""
    tokens_bucket: int
    """round(log2(tokens per optimizer step))."""
    seq_bucket: int
    device: str
    """cpu | cuda."""
    launcher: str
    """python | torchrun."""

    @classmethod
    def from_contract(cls, contract: Contract, model_facts: Mapping[str, int] | None = None) -> WorkloadSignature:
        """From the contract and the probe's model facts (``params``, ``active_params``)."""
        facts = model_facts or {}
        params, active = facts.get("params"), facts.get("active_params")
        family = "unknown" if not params else "moe" if active and active < params else "dense"
        workload = contract.workload
        return cls(family=family, params_bucket=_bucket(params), tokens_bucket=_bucket(workload.tokens_per_step),
                   seq_bucket=_bucket(workload.seq_len), device=contract.memory.device, launcher=workload.launcher)

    @property
    def key(self) -> str:
        return (f"{self.family}/p{self.params_bucket}/t{self.tokens_bucket}/s{self.seq_bucket}/"
                f"{self.device}/{self.launcher}")

    def similarity(self, other: WorkloadSignature) -> float:
        """1 for the same signature, falling towards 0 as the workloads differ."""
        distance = sum(
            abs(a - b) if UNKNOWN not in (a, b) else (0 if a == b else 2)
            for a, b in ((self.params_bucket, other.params_bucket), (self.tokens_bucket, other.tokens_bucket),
                         (self.seq_bucket, other.seq_bucket))
        )
        score = math.exp(-distance / BUCKET_SCALE)
        if self.device != other.device:
            score *= CROSS_DEVICE
        if self.family != other.family:
            score *= CROSS_FAMILY
        if self.launcher != other.launcher:
            score *= CROSS_LAUNCHER
        return score

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WorkloadSignature:
        return cls(**json.loads(text))
