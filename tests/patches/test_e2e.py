"""Each patch that applies to a fixture keeps its loss: real runs of the patched training script.

The fixture is copied to a temporary directory, patched there with ``apply_patches`` (never in
place) and run for a few steps with the probe on; the per-step losses must match the unpatched
run's within 1e-4 (SDPA and the batched MoE reorder float operations, nothing more).
``compile_model`` is left out: a cold compile takes 33-42 s here, more than this suite's budget.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infrarsi.contract import Contract, LossInvariant, MemoryBudget, Scope, Workload
from infrarsi.patches import REGISTRY, apply_patches, find_sites
from infrarsi.project import editable_sources

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).parents[2] / "fixtures"
STEPS = 5
SLOW = {"compile_model"}
# Source edits that keep a fixture's default behaviour but hand the patch a site: the dense
# fixture already checkpoints behind a flag and picks its optimizer implementation by a knob.
BASELINE_EDITS = {
    "dense_gpt": {
        "model.py": [
            (
                "            if self.config.activation_checkpointing and self.training:\n"
                "                x = checkpoint(block, x, use_reentrant=False)\n"
                "            else:\n"
                "                x = block(x)\n",
                "            x = block(x)\n",
            ),
            ("betas=betas, **extra_args)", "betas=betas)"),
        ],
    },
}


# Smaller than the defaults, to keep the suite short; the patches do not depend on the sizes.
RUN_ARGS = {"dense_gpt": ["--n_layer=2", "--block_size=64", "--batch_size=8"]}


def _contract(repo: Path) -> Contract:
    editable = sorted(p.name for p in repo.glob("*.py") if p.name != "data.py")
    return Contract(
        workload=Workload(entry="train.py", command=[sys.executable, "train.py"], tokens_per_step=1, seq_len=1,
                          global_batch=1, seed=1337, warmup_steps=0, measured_steps=STEPS, planned_steps=STEPS),
        loss=LossInvariant(compare_steps=STEPS, tolerance=1e-4, numerics_tolerance=1e-3),
        memory=MemoryBudget(budget_bytes=8 << 30),
        scope=Scope(editable=editable),
        knobs=[],
    )


def _losses(repo: Path, fixture: str) -> list[float]:
    probe = repo / "probe.jsonl"
    env = {**os.environ, "INFRARSI_PROBE_FILE": str(probe), "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "train.py", f"--max_iters={STEPS}", *RUN_ARGS.get(fixture, [])], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    events = [json.loads(line) for line in probe.read_text().splitlines()]
    return [e["loss"] for e in events if e["event"] == "step"]


def _baseline(fixture: str, tmp_path: Path) -> Path:
    repo = tmp_path / "baseline"
    shutil.copytree(FIXTURES / fixture, repo, ignore=shutil.ignore_patterns("__pycache__", "*.jsonl"))
    for rel, edits in BASELINE_EDITS.get(fixture, {}).items():
        text = (repo / rel).read_text()
        for old, new in edits:
            assert old in text, f"{fixture}/{rel} changed: update BASELINE_EDITS"
            text = text.replace(old, new)
        (repo / rel).write_text(text)
    return repo


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.iterdir() if (p / "train.py").is_file()))
def test_patched_fixture_keeps_its_loss(fixture, tmp_path):
    base = _baseline(fixture, tmp_path)
    contract = _contract(base)
    names = sorted({name for name, _ in find_sites(editable_sources(base, contract), contract)} - SLOW)
    names = [n for n in names if not REGISTRY[n].gpu_only]
    assert names, f"no CPU patch applies to {fixture}"
    reference = _losses(base, fixture)
    assert len(reference) == STEPS
    for name in names:
        work = tmp_path / name
        shutil.copytree(base, work, ignore=shutil.ignore_patterns("probe.jsonl"))
        [outcome] = apply_patches(work, [name], contract, "cpu")
        assert outcome.status == "applied", (name, outcome.reason)
        losses = _losses(work, fixture)
        assert len(losses) == STEPS
        worst = max(abs(a - b) for a, b in zip(losses, reference, strict=True))
        print(f"{fixture}: {name} applied, largest loss difference {worst:.1e} over {STEPS} steps")
        assert worst <= 1e-4, f"{fixture}: {name} moved the loss by {worst:.2e}: {losses} vs {reference}"
