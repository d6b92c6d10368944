"""triu without diagonal=1 also hides each token from itself: not the causal mask."""

import torch
import torch.nn.functional as F


def attend(q, k, v):
    T = q.size(-2)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=0)
    att = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    att = att.masked_fill(mask, float("-inf"))
    att = att.softmax(dim=-1)
    y = att @ v
    return y
