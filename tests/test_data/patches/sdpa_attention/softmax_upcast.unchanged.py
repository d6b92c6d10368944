"""Softmax in float32 on half-precision scores (LLaMA style) is a different computation."""

import math

import torch
import torch.nn.functional as F


def attend(q, k, v):
    T = q.size(-2)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=q.device), diagonal=1)
    scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(mask, float("-inf"))
    scores = F.softmax(scores.float(), dim=-1).type_as(q)
    return torch.matmul(scores, v)
