"""An absl job configured by an ml_collections ConfigDict: ``--config=configs/default.py`` names the
file whose ``get_config()`` builds it, ``--config.batch_size=32`` overrides a leaf
(tests/knobs/test_nested.py reads it; nothing here is run)."""

from absl import app
from ml_collections import config_flags

import train

_CONFIG = config_flags.DEFINE_config_file("config", "configs/default.py", "Training configuration.", lock_config=True)


def main(argv):
    train.train_and_evaluate(_CONFIG.value)


if __name__ == "__main__":
    app.run(main)
