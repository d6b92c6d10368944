import torch

for step in range(10):
    loss = losses[step]
    loss.backward()
