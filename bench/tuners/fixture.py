"""A fixture prepared for the benchmark: a git copy, its contract cut down to the benchmark's space.

The reduced spaces leave out what would make measuring every configuration unaffordable on two
cores: ``compile`` (33-42 s of cold compilation per trial), ``threads`` (kept at torch's default,
all cores), ``fused``/``foreach`` optimizers (within noise on CPU) and, for the MoE fixture,
``bfloat16`` (the dense fixture keeps it: it is the trap an LLM prior walks into on this CPU).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from infrarsi.byte_units import MIB
from infrarsi.contract import STATE_DIR, Contract, load_contract, save_contract
from infrarsi.stages.init import init

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


@dataclass(frozen=True, slots=True)
class ReducedSpace:
    knobs: dict[str, list]
    """Tunable knob -> its values in the benchmark (every other knob stays at its default)."""
    patches: list[str]
    budget_mib: int
    """Used when the fixture's README does not state a budget (chosen from measured peaks so
    the fastest micro-batch only fits with activation checkpointing)."""
    short_values: dict[str, list] | None = None
    """Configurations with any of these values are measured once, with few steps (see measure_space)."""


SPACES = {
    "dense_gpt": ReducedSpace(
        knobs={"micro_batch_size": [1, 2, 4, 8, 16], "activation_checkpointing": [False, True],
               "dtype": ["float32", "bfloat16"]},
        patches=["sdpa_attention"], budget_mib=560, short_values={"dtype": ["bfloat16"]}),
    "moe_gpt": ReducedSpace(
        knobs={"micro_batch_size": [1, 2, 4, 8, 16], "activation_checkpointing": [False, True]},
        patches=["sdpa_attention", "moe_batched_dispatch"], budget_mib=640),
}

_README_BUDGET = re.compile(r"<!--\s*infrarsi:\s*budget_mib\s*=\s*(\d+)\s*-->")


def budget_mib(fixture: str) -> int:
    """The fixture README's budget when it states one, else the benchmark's own."""
    found = _README_BUDGET.search((FIXTURES / fixture / "README.md").read_text())
    return int(found.group(1)) if found else SPACES[fixture].budget_mib


def reduce_contract(contract: Contract, space: ReducedSpace, pins: dict[str, str] | None = None) -> Contract:
    """Only the space's knobs stay tunable; a pinned knob (``--pin dtype=float32``) is left out."""
    knobs = []
    for knob in contract.knobs:
        values = None if knob.name in (pins or {}) else space.knobs.get(knob.name)
        knobs.append(replace(knob, tunable=values is not None, domain=list(values) if values else knob.domain))
    missing = set(space.knobs) - {k.name for k in contract.knobs}
    if missing:
        raise SystemExit(f"the fixture's contract has no knob {sorted(missing)}")
    return replace(contract, knobs=knobs)


def git_copy(fixture: str, dest: Path) -> Path:
    """``fixture`` copied to ``dest/fixture`` as a git repo with one commit."""
    repo = Path(dest) / fixture
    shutil.copytree(FIXTURES / fixture, repo, ignore=shutil.ignore_patterns("__pycache__", STATE_DIR))
    git = ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "baseline"]):
        subprocess.run([*git, *args], check=True)
    return repo


def prepare(fixture: str, dest: Path, pins: dict[str, str] | None = None) -> Path:
    """Copy ``fixture`` to ``dest`` as a git repo, init it with the budget, reduce its contract.

    A pin may only hold a knob at its default: the contract fixes the job as written."""
    repo = git_copy(fixture, dest)
    result = init(repo, budget_bytes=budget_mib(fixture) * MIB)
    if not result.ok:
        raise SystemExit(f"init {fixture}: {result.message}")
    contract = load_contract(repo)
    for name, value in (pins or {}).items():
        if str(contract.knob(name).default) != value:
            raise SystemExit(f"--pin {name}={value}: only the default ({contract.knob(name).default}) can be pinned")
    save_contract(reduce_contract(contract, SPACES[fixture], pins), repo)
    return repo
