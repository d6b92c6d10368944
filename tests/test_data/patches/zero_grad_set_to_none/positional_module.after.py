def train_step(model, optimizer, batch):
    model.zero_grad(True)
    loss = model(batch).mean()
    loss.backward()
    optimizer.step()
