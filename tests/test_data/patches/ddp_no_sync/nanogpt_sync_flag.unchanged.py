from torch.nn.parallel import DistributedDataParallel as DDP


def train(model, get_batch, optimizer, gradient_accumulation_steps, ddp):
    if ddp:
        model = DDP(model)
    for micro_step in range(gradient_accumulation_steps):
        if ddp:
            model.require_backward_grad_sync = (micro_step == gradient_accumulation_steps - 1)
        X, Y = get_batch("train")
        logits, loss = model(X, Y)
        loss.backward()
    optimizer.step()
