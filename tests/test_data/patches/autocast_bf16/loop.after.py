import torch
import torch.nn.functional as F


def train(model, loader, optimizer, device):
    model.train()
    for inputs, labels in loader:
        inputs, labels = inputs.to(device), labels.to(device)
        optimizer.zero_grad()
        with torch.autocast(device_type="cuda" if torch.cuda.is_available() else "cpu", dtype=torch.bfloat16):
            logits = model(inputs)
            loss = F.cross_entropy(logits, labels)
        loss.backward()
        optimizer.step()
