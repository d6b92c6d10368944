"""Patches that change which random number a dropout draws for which element
(infrarsi/patches/dropout_draws.py) are not tried where the model has such a dropout active: the
loss drifts from step 0 and no check can tell that from a wrong model."""

import shutil
import textwrap
from pathlib import Path

from infrarsi.contract import load_contract
from infrarsi.patches import REGISTRY, applicable
from infrarsi.patches.dropout_draws import DropoutSite, active_dropout
from infrarsi.patches.gradient_accumulation import KNOB
from infrarsi.project import editable_sources
from infrarsi.stages.init import init
from tests.stages.conftest import git_repo

CLASSIFIER = textwrap.dedent('''
    import torch.nn as nn
    import torch.nn.functional as F


    class Classifier(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.features = nn.Conv2d(1, 4, 3)
            self.on_maps = nn.Dropout(0.2)
            self.on_logits = nn.Dropout()
            self.switched_off = nn.Dropout(p=0.0)
            self.configured = nn.Dropout(cfg.drop)
            self.out = nn.Linear(4, 2)

        def forward(self, x):
            x = F.relu(self.features(x))
            x = self.on_maps(x)
            x = x.flatten(1)
            x = self.on_logits(self.out(x))
            return F.dropout(x, 0.1, training=self.training) + F.dropout(x, training=False)


    head = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Dropout2d(0.1), nn.Flatten(), nn.Dropout(0.3), nn.Linear(4, 2))
''')


def test_active_dropouts_are_found_with_whether_they_fall_on_convolution_maps():
    assert active_dropout({"model.py": CLASSIFIER}) == [
        DropoutSite("model.py", 10, True),    # called before the forward flattens
        DropoutSite("model.py", 11, False),   # the default p, on the flattened features
        DropoutSite("model.py", 21, False),   # functional, after the flatten; training=False is not
        DropoutSite("model.py", 24, True),    # a Dropout2d
        DropoutSite("model.py", 24, False),   # after the Sequential's Flatten
    ]
    assert active_dropout({"plain.py": "import torch\nx = torch.ones(2)\n", "broken.py": "def (:\n"}) == []


def test_the_patches_that_redraw_masks_say_where_and_why_they_are_not_tried():
    split, channels = REGISTRY["gradient_accumulation"], REGISTRY["channels_last"]
    why = split.refusal("cpu", {"model.py": CLASSIFIER})
    assert why and "model.py:10" in why and "model.py:11" in why and "micro-batches" in why
    why = channels.refusal("cuda", {"model.py": CLASSIFIER})
    assert why and "model.py:10" in why and "model.py:11" not in why and "channels-last" in why
    # Only a dropout on the flattened features: channels-last keeps its draws where they were.
    logits_only = CLASSIFIER.replace("self.on_maps(x)", "x").replace("nn.Dropout2d(0.1), ", "")
    logits_only = logits_only.replace("nn.Flatten(), nn.Dropout(0.3)", "nn.Dropout(0.3), nn.Flatten()")
    assert channels.refusal("cpu", {"model.py": logits_only}) is not None  # the Sequential's, before its Flatten
    assert channels.refusal("cpu", {"model.py": logits_only.replace("nn.Dropout(0.3), nn.Flatten()", "nn.Flatten()")}) \
        is None
    assert REGISTRY["sdpa_attention"].refusal("cpu", {"model.py": CLASSIFIER}) is None


def test_a_run_does_not_try_them_on_a_job_with_dropout(tmp_path: Path):
    repo = tmp_path / "job"
    shutil.copytree(Path(__file__).parents[1] / "test_data" / "stages" / "vision", repo)
    script = repo / "train.py"
    script.write_text(script.read_text().replace("torch.nn.GELU(), torch.nn.Flatten()",
                                                 "torch.nn.GELU(), torch.nn.Dropout(0.1), torch.nn.Flatten()"))
    git_repo(repo)
    assert init(repo, budget_bytes=2**30).ok
    contract = load_contract(repo)
    tried, refused = applicable(editable_sources(repo, contract), contract, "cpu")
    assert "channels_last" not in tried and "train.py:20" in refused["channels_last"]


def test_the_split_count_is_no_knob_of_a_job_with_dropout(tmp_path: Path):
    """Gradient accumulation is tuned through the knob init adds (its split count): a job whose
    model has dropout gets none, and the run lists the patch skipped with the reason."""
    script = (Path(__file__).parents[1] / "test_data" / "patches" / "gradient_accumulation" / "runnable.py").read_text()
    jobs = {"plain": script, "dropout": script.replace("torch.nn.ReLU(), ", "torch.nn.ReLU(), torch.nn.Dropout(0.1), ")}
    knobs = {}
    for name, text in jobs.items():
        repo = tmp_path / name
        repo.mkdir()
        (repo / "train.py").write_text(text)
        git_repo(repo)
        assert init(repo, budget_bytes=2**30).ok
        contract = load_contract(repo)
        knobs[name] = {k.name for k in contract.knobs}
        tried, refused = applicable(editable_sources(repo, contract), contract, "cpu")
    assert KNOB in knobs["plain"] and KNOB not in knobs["dropout"]
    assert "gradient_accumulation" not in tried and "train.py:16" in refused["gradient_accumulation"]
