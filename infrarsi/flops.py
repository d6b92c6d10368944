"""Model FLOPs per token and MFU, the way nanoGPT and PaLM count them.

Per token, a training step (forward + backward) costs 6·N FLOPs for the matmuls with the N weights
(2 forward, 4 backward) plus 12·L·H·Q·T for attention (QKᵀ and AV: 2·2·T·Q per head and layer
forward, three times that with the backward), with L layers, H heads, head size Q and sequence
length T (PaLM, Chowdhery et al. 2022, appendix B; nanoGPT ``estimate_mfu``). For a mixture of
experts N is the *active* parameter count: the weights one token actually multiplies with.
MFU counts model FLOPs only, so recomputation (activation checkpointing) lowers it, as it should.
"""

from __future__ import annotations

from collections.abc import Mapping


def flops_per_token(*, params: int, layers: int, heads: int, head_dim: int, seq_len: int) -> float:
    """6N + 12·L·H·Q·T training FLOPs per token; ``params`` is N (active parameters for MoE)."""
    for name, value in (("params", params), ("layers", layers), ("heads", heads), ("head_dim", head_dim),
                        ("seq_len", seq_len)):
        if value < 0:
            raise ValueError(f"{name} must not be negative, got {value}")
    return 6.0 * params + 12.0 * layers * heads * head_dim * seq_len


def flops_per_token_from_facts(facts: Mapping[str, int]) -> float:
    """The same from the probe's ``model`` event (uses ``active_params`` when it is there)."""
    missing = [k for k in ("layers", "heads", "head_dim", "seq_len") if k not in facts]
    if "params" not in facts and "active_params" not in facts:
        missing.insert(0, "params")
    if missing:
        raise ValueError(f"the model facts lack {', '.join(missing)}; call probe.model(...) in the script")
    return flops_per_token(
        params=int(facts.get("active_params") or facts["params"]),
        layers=int(facts["layers"]),
        heads=int(facts["heads"]),
        head_dim=int(facts["head_dim"]),
        seq_len=int(facts["seq_len"]),
    )


def mfu(tokens_per_s: float, flops_per_token: float, peak_flops: float) -> float:
    """Model FLOPs utilization: achieved model FLOP/s over the peak (a fraction, not a percentage)."""
    if peak_flops <= 0:
        raise ValueError(f"peak FLOP/s must be positive, got {peak_flops}")
    if tokens_per_s < 0 or flops_per_token < 0:
        raise ValueError("tokens/s and FLOPs per token must not be negative")
    return tokens_per_s * flops_per_token / peak_flops
