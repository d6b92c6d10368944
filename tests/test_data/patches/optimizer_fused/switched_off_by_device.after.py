import inspect

import torch


def make_optimizer(params, lr, device_type):
    has_fused = "fused" in inspect.signature(torch.optim.AdamW).parameters
    use_fused = has_fused
    return torch.optim.AdamW(params, lr=lr, fused=use_fused)
