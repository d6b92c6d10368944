"""bench/ is a directory of scripts, not an installed package: put the repo root on the path."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
