"""The same job with its ConfigDict built here and defined with ``DEFINE_config_dict``, overridden
as ``--cfg.optim.lr=0.02``."""

import ml_collections
from absl import app
from ml_collections import config_flags

import train


def get_config():
    config = ml_collections.ConfigDict(dict(seed=1, batch_size=64, num_train_steps=200))
    config.optim = ml_collections.ConfigDict({"lr": 0.01, "momentum": 0.9})
    config.data = ml_collections.ConfigDict({"num_workers": 2, "shuffle": True})
    config.model = {"width": 32, "depth": 1}
    return config


_CONFIG = config_flags.DEFINE_config_dict(name="cfg", config=get_config())


def main(argv):
    train.train_and_evaluate(_CONFIG.value)


if __name__ == "__main__":
    app.run(main)
