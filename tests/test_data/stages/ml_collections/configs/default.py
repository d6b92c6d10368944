"""The default configuration: a node filled attribute by attribute, one sub-node built by a function."""

import ml_collections


def get_data_config():
    data = ml_collections.ConfigDict()
    data.num_workers = 2
    data.shuffle = True
    return data


def get_config():
    config = ml_collections.ConfigDict()
    config.seed = 0
    config.batch_size = 128
    config.num_train_steps = 1000
    config.optim = ml_collections.ConfigDict()
    config.optim.lr = 0.1
    config.optim.momentum = 0.9
    config.data = get_data_config()
    config.model = ml_collections.ConfigDict({"width": 64, "depth": 2})
    return config
