def train_step(model, optimizer, batch):
    model.zero_grad(False)
    loss = model(batch).mean()
    loss.backward()
    optimizer.step()
