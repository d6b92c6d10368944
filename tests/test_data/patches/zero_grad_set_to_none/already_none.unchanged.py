def train_step(model, optimizer, batch, keep):
    optimizer.zero_grad()
    model.zero_grad(set_to_none=True)
    optimizer.zero_grad(set_to_none=keep)
