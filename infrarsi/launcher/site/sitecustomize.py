"""Loaded by every Python process of an InfraRSI trial (this directory is first on its PYTHONPATH).

Inert unless ``INFRARSI_RECORDS`` names the trial's record channel; then :mod:`_infrarsi_launcher`
arms itself to observe the job once it imports torch (and applies the speed settings the runner
asked for). With only a settings variable set (``INFRARSI_CUDNN_BENCHMARK``…) it applies those. Either way the ``sitecustomize`` that this
one shadows (a virtual environment's, a distribution's) still runs. Only the standard library here:
the job's interpreter need not have InfraRSI installed. See docs/launcher.md.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _chain() -> None:
    """Run the next ``sitecustomize`` on sys.path, the one Python would have run without us."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if os.environ.get("INFRARSI_RECORDS"):
    import _infrarsi_launcher

    _infrarsi_launcher.arm()
elif any(os.environ.get(v) for v in ("INFRARSI_NUM_THREADS", "INFRARSI_CUDNN_BENCHMARK", "INFRARSI_TF32")):
    import _infrarsi_launcher  # a person's run with the launcher's settings: apply them, observe nothing

    _infrarsi_launcher.arm_settings()
_chain()
