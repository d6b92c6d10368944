"""Speed settings the launcher applies to any job, tuned by the search like the script's own knobs.

They need no option in the script: the runner sets environment variables and the launcher
(``site/_infrarsi_launcher.py``) applies them the moment the job imports torch, before the job's
own code runs on. Each is a contract knob with ``flag_style = "env"`` and the variable as its flag:

- ``launcher_threads`` (role ``threads``): ``OMP_NUM_THREADS`` and ``torch.set_num_threads``; 0 keeps
  torch's default (one thread per physical core). Only for a single-process job whose script has no
  thread knob of its own (torchrun sets ``OMP_NUM_THREADS`` itself).
- ``cudnn_benchmark`` (CUDA only): ``torch.backends.cudnn.benchmark = True``.
- ``tf32_matmul`` (CUDA only, role ``matmul_precision``): TF32 for float32 matmuls and convolutions.
- ``cuda_expandable_segments`` (CUDA only, role ``allocator``): ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``.

CUDA-only settings are offered only where the machine has a GPU. A setting at its default sets no
variable, so the baseline runs as the owner's command does. docs/launcher.md lists the variables.
"""

from __future__ import annotations

from dataclasses import dataclass

from infrarsi.contract import Contract, Knob, KnobValue
from infrarsi.launcher import SITE_DIR

THREADS = "INFRARSI_NUM_THREADS"
CUDNN_BENCHMARK = "INFRARSI_CUDNN_BENCHMARK"
TF32 = "INFRARSI_TF32"
ALLOC_CONF = "PYTORCH_CUDA_ALLOC_CONF"


@dataclass(frozen=True, slots=True)
class LauncherSetting:
    name: str
    role: str
    flag: str
    """The variable the contract shows (the one a person sets to reproduce it)."""
    cuda_only: bool


SETTINGS = (
    LauncherSetting("launcher_threads", "threads", "OMP_NUM_THREADS", cuda_only=False),
    LauncherSetting("cudnn_benchmark", "cudnn_benchmark", CUDNN_BENCHMARK, cuda_only=True),
    LauncherSetting("tf32_matmul", "matmul_precision", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", cuda_only=True),
    LauncherSetting("cuda_expandable_segments", "allocator", ALLOC_CONF, cuda_only=True),
)
_BY_NAME = {s.name: s for s in SETTINGS}


def launcher_knobs(knobs: list[Knob], *, has_cuda: bool, cpu_count: int, auto_threads: int | None,
                   launcher: str) -> list[Knob]:
    """The launcher settings this job gets: none that a script knob of the same role already sets."""
    roles = {k.role for k in knobs if k.tunable or k.role != "workload"}
    out = []
    for s in SETTINGS:
        if (s.cuda_only and not has_cuda) or s.role in roles:
            continue
        if s.name == "launcher_threads":
            if launcher != "python":
                continue
            counts = [n for n in range(1, cpu_count + 1) if n != auto_threads]
            if not counts:
                continue
            out.append(Knob(name=s.name, role=s.role, type="int", default=0, flag=s.flag, flag_style="env",
                            domain=[0, *counts], tunable=True, source="launcher",
                            help="intra-op CPU threads, set by the launcher (0: torch's default)"))
        else:
            out.append(Knob(name=s.name, role=s.role, type="bool", default=False, flag=s.flag, flag_style="env",
                            domain=[False, True], tunable=True, source="launcher",
                            help=f"{s.name.replace('_', ' ')}, set by the launcher"))
    return out


def settings_env(contract: Contract, values: dict[str, KnobValue], *, for_person: bool = False) -> dict[str, str]:
    """The variables that put ``values``' launcher settings in place (none for a setting at its default).

    A trial sets InfraRSI's variables, which its launcher applies; ``for_person`` gives the command a
    person runs without InfraRSI: torch's own variables, and the launcher's directory on PYTHONPATH
    only for cuDNN benchmarking (torch reads no variable for it)."""
    env: dict[str, str] = {}
    for name, value in values.items():
        knob = next((k for k in contract.knobs if k.name == name and k.flag_style == "env"), None)
        if knob is None or value == knob.default or name not in _BY_NAME:
            continue
        if name == "launcher_threads" and isinstance(value, int) and value > 0:
            env["OMP_NUM_THREADS"] = str(value)
            if not for_person:
                env[THREADS] = str(value)
        elif name == "cudnn_benchmark" and value:
            env[CUDNN_BENCHMARK] = "1"
            if for_person:
                env["PYTHONPATH"] = str(SITE_DIR)
        elif name == "tf32_matmul" and value:
            env["TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"] = "1"
            if not for_person:
                env[TF32] = "1"
        elif name == "cuda_expandable_segments" and value:
            env[ALLOC_CONF] = "expandable_segments:True"
    return env
