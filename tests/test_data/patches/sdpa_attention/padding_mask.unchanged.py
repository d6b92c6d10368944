"""A padding mask from the caller is not a causal mask."""

import math

import torch
import torch.nn.functional as F


def attend(q, k, v, attention_mask):
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(attention_mask == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    y = att @ v
    return y
