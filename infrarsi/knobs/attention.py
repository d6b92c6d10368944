"""Which attention the job's code runs, read from its sources (nothing is imported or run).

A fused kernel (``F.scaled_dot_product_attention``, FlashAttention, xFormers' memory-efficient
attention, FlexAttention) keeps no score matrix for the backward: the activation memory has no
5as/h term (``priors/activation_bytes.py``) and selective recomputation, which exists to drop that
term, saves next to nothing there. Code that computes ``softmax(q @ k.T)`` itself keeps the scores.
"""

from __future__ import annotations

import ast
from pathlib import Path

from infrarsi.knobs.source import DiscoveryError, python_files, read_text

FUSED = "fused"
EAGER = "eager"
FUSED_CALLS = frozenset({"scaled_dot_product_attention", "flash_attn_func", "flash_attn_varlen_func",
                         "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func", "memory_efficient_attention",
                         "flex_attention"})
"""Calls that run attention as one fused kernel, by their last name."""


def _called(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else "")
    return names


def _matmul(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult) for n in ast.walk(tree))


def attention_kind(repo: Path, files: list[str] | None = None) -> str:
    """``fused`` where some source calls a fused attention kernel, ``eager`` where none does and one
    takes a softmax beside a matrix product, "" where neither (the attention lives in a library the
    repo imports, or there is none)."""
    eager = False
    for rel in python_files(repo) if files is None else files:
        try:
            tree = ast.parse(read_text(repo, rel), filename=rel)
        except (SyntaxError, ValueError, DiscoveryError):
            continue  # init reports a file it cannot parse where it reads its knobs
        called = _called(tree)
        if called & FUSED_CALLS:
            return FUSED
        eager = eager or ("softmax" in called and (_matmul(tree) or bool(called & {"matmul", "bmm", "einsum"})))
    return EAGER if eager else ""
