"""A smaller configuration written as dict literals."""

import ml_collections


def get_config():
    config = ml_collections.ConfigDict({
        "seed": 0,
        "batch_size": 32,
        "num_train_steps": 100,
        "optim": {"lr": 0.05, "momentum": 0.9},
    })
    config.data = ml_collections.ConfigDict(dict(num_workers=1, shuffle=False))
    config.model = ml_collections.ConfigDict(dict(width=32, depth=1))
    return config
