"""RMSprop has no fused kernel; the knob-driven AdamW is the search's business."""
import torch


def build(model, impl):
    a = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    b = torch.optim.AdamW(model.parameters(), fused=impl == "fused")
    return a, b
