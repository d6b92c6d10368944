import torch.optim as optim


def build(model):
    # plain Adam: torch picks the for-loop implementation on CPU
    return optim.Adam(model.parameters(), lr=1e-3, fused=True)
