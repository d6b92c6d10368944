import torch
import torch.nn.functional as F

grad_accum_splits = 2  # micro-batches per step, gradients accumulated (added by InfraRSI)


def train(model, device, train_loader, optimizer):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        _infrarsi_full_batch = (data, target)
        _infrarsi_batch_loss = 0.0
        for data, target in zip(*(t.chunk(grad_accum_splits) for t in _infrarsi_full_batch)):
            output = model(data)
            loss = F.nll_loss(output, target)
            (loss * (len(data) / len(_infrarsi_full_batch[0]))).backward()
            _infrarsi_batch_loss = _infrarsi_batch_loss + (loss * (len(data) / len(_infrarsi_full_batch[0]))).detach()
        loss = _infrarsi_batch_loss
        optimizer.step()
        print(batch_idx, loss.item())
