"""Bidirectional (encoder) attention: no causal mask, so is_causal=True would be wrong."""

import math

import torch
import torch.nn.functional as F


def attend(q, k, v):
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = F.softmax(att, dim=-1)
    return att @ v
