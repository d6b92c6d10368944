"""The training loop; every setting comes from the ConfigDict."""

import torch
from torch.utils.data import DataLoader, TensorDataset


def train_and_evaluate(config):
    torch.manual_seed(config.seed)
    data = TensorDataset(torch.randn(512, 32), torch.randint(0, 4, (512,)))
    loader = DataLoader(data, batch_size=config.batch_size, shuffle=config.data.shuffle,
                        num_workers=config.data.num_workers)
    layers = [torch.nn.Linear(32, config.model.width), torch.nn.ReLU()]
    for _ in range(config.model.depth - 1):
        layers += [torch.nn.Linear(config.model.width, config.model.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(config.model.width, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=config.optim.lr, momentum=config.optim.momentum)
    step = 0
    while step < config.num_train_steps:
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step >= config.num_train_steps:
                return
