"""The implementation is a knob the search tunes: the patch must leave it alone."""
import torch


def configure(model, impl):
    extra = dict(fused=True) if impl == "fused" else dict(foreach=impl == "foreach")
    return torch.optim.AdamW(model.parameters(), lr=1e-3, **extra)


def configure_flag(model, args):
    return torch.optim.Adam(model.parameters(), foreach=args.foreach)
