"""The interpreter variables InfraRSI itself sets for a trial's processes, in one place.

Whatever else builds a trial's environment (the inherited one, or an allow-listed one) must keep
these. They make bytecode irrelevant to what a trial runs: nothing is written
(``PYTHONDONTWRITEBYTECODE``), and nothing is read from the ``__pycache__`` folders next to the
sources — neither the user's, possibly stale, nor any a candidate planted — because every
module's bytecode is looked up under a prefix folder that is fresh for each trial and stays empty
(``PYTHONPYCACHEPREFIX``; see docs/INTERFACES.md). The price is compiling every module the job
imports, torch's included, from source at each start: the same for the baseline and every
candidate, so it shifts no comparison.
"""

from __future__ import annotations

from pathlib import Path


def infrarsi_env(*, pycache: Path) -> dict[str, str]:
    """The interpreter variables a trial sets on top of (or into) its environment; the launcher's
    own (its channel, when to stop, PYTHONPATH) come from ``infrarsi.launcher.launcher_env``."""
    return {
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPYCACHEPREFIX": str(pycache),
    }
