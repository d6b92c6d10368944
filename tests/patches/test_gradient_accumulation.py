"""The gradient_accumulation patch on a script with none (tests/test_data/patches/gradient_accumulation/runnable.py):
the patched script, run for real, trains the same model step by step."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from infrarsi.patches.gradient_accumulation import GradientAccumulation

SCRIPT = Path(__file__).parents[1] / "test_data" / "patches" / "gradient_accumulation" / "runnable.py"


def checksums(path: Path, *args: str) -> list[float]:
    return printed(path, "checksum", *args)


def printed(path: Path, what: str, *args: str) -> list[float]:
    """The numbers the script prints after ``what`` (``loss``, ``checksum``), one per step."""
    done = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [float(x) for x in re.findall(rf"{what} (\S+)", done.stdout)]


@pytest.fixture(scope="module")
def patched(tmp_path_factory) -> tuple[Path, list]:
    result = GradientAccumulation().transform("train.py", SCRIPT.read_text())
    out = tmp_path_factory.mktemp("ga") / "train.py"
    out.write_text(result.code)
    return out, result


def test_the_step_is_split_and_a_split_knob_added(patched):
    path, result = patched
    code = path.read_text()
    assert len(result.sites) == 1 and "backward" in result.sites[0].message
    assert "for data, target in zip(*(t.chunk(args.grad_accum_splits) for t in _infrarsi_full_batch)):" in code
    assert "(loss * (len(data) / len(_infrarsi_full_batch[0]))).backward()" in code  # mean loss: weighted by the share
    [knob] = result.knobs
    assert (knob.name, knob.role, knob.default, knob.flag, knob.domain) == (
        "grad_accum_splits", "grad_accum", 2, "--grad_accum_splits", [1, 2, 4])
    assert GradientAccumulation().rewrite(code) is None  # applied once only


@pytest.mark.e2e
def test_the_loss_trajectory_holds(patched):
    splits = "4"
    path, _ = patched
    before = checksums(SCRIPT)
    after = checksums(path, "--grad_accum_splits", splits)
    assert len(before) == len(after) == 6
    assert max(abs(a - b) for a, b in zip(before, after, strict=True)) < 1e-5


@pytest.mark.e2e
def test_the_loop_still_logs_the_whole_batch_s_loss(patched):
    """The script prints ``loss.item()`` after the step: the batch's, not the last micro-batch's."""
    path, _ = patched
    assert "loss = _infrarsi_batch_loss" in path.read_text()
    before, after = printed(SCRIPT, "loss"), printed(path, "loss", "--grad_accum_splits", "4")
    assert len(before) == len(after) == 6 and max(abs(a - b) for a, b in zip(before, after, strict=True)) < 1e-6


@pytest.mark.e2e
def test_a_sum_reduced_loss_is_not_reweighted(tmp_path):
    source = SCRIPT.read_text().replace('default="mean"', 'default="sum"').replace(
        "reduction=args.reduction", "reduction='sum'")
    code, before, after = _run_patched(tmp_path, source)
    assert "_infrarsi_full_batch[0]" not in code
    assert max(abs(a - b) for a, b in zip(before, after, strict=False)) < 1e-5


def test_the_loss_the_loop_splits_decides_its_weighting_not_another_in_the_file():
    loop = ("def train(loader, model, opt):\n    for x, y in loader:\n        opt.zero_grad()\n"
            "        loss = {loss}\n        loss.backward()\n        opt.step()\n")
    evaluation = "def test(model, x, y):\n    return F.nll_loss(model(x), y, reduction='sum')\n"
    weighted = "(loss * (len(x) / len(_infrarsi_full_batch[0]))).backward()"
    # An evaluation's summed loss (as pytorch/examples' MNIST has) leaves the mean-reduced training loss weighted.
    patched = GradientAccumulation().transform("t.py", loop.format(loss="F.nll_loss(model(x), y)") + evaluation).code
    assert weighted in patched
    # A loss function built with reduction='sum', below the loop that calls it, is summed as it is.
    summed = loop.format(loss="crit(model(x), y)") + "crit = nn.MSELoss(reduction='sum')\n"
    assert weighted not in GradientAccumulation().transform("t.py", summed).code
    # A function of the file that sums (a VAE's reconstruction + KL loss), called through another.
    summed = (loop.format(loss="vae_loss(model(x), x)")
              + "def recon(a, b):\n    return F.binary_cross_entropy(a, b, reduction='sum')\n"
              + "def vae_loss(a, b):\n    return recon(a, b) + 0.5 * a.pow(2).sum()\n")
    assert weighted not in GradientAccumulation().transform("t.py", summed).code
    # A name that only ends like a sum-reduced function's is not one.
    mean = loop.format(loss="F.nll_loss(model(x), y)") + "def loss(a, b):\n    return F.mse_loss(a, b, reduction='sum')\n"
    assert weighted in GradientAccumulation().transform("t.py", mean).code


def _run_patched(tmp_path, source: str) -> tuple[str, list[float], list[float]]:
    """The patched code, and the checksums ``source`` gives before and after the patch."""
    original, patched = tmp_path / "original.py", tmp_path / "patched.py"
    original.write_text(source)
    code = GradientAccumulation().transform("train.py", source).code
    patched.write_text(code)
    return code, checksums(original), checksums(patched)


def test_left_alone_without_the_pattern():
    two_backwards = "for x in loader:\n    opt.zero_grad()\n    a(x).backward()\n    b(x).backward()\n    opt.step()\n"
    no_zero = "for x in loader:\n    model(x).backward()\n    opt.step()\n"
    for source in (two_backwards, no_zero):
        assert GradientAccumulation().rewrite(source) is None


@pytest.mark.e2e
def test_a_batch_of_one_tensor(tmp_path):
    """``for i, (x, _) in enumerate(loader)``: one tensor is chunked, and still unpacked from zip's tuples."""
    source = SCRIPT.read_text().replace("output = model(data)\n", "output = model(data)\n    target = output.argmax(1).detach() * 0\n").replace(
        "for batch_idx, (data, target) in enumerate(loader):", "for batch_idx, (data, _) in enumerate(loader):")
    code, before, after = _run_patched(tmp_path, source)
    assert "for data, in zip(" in code
    assert len(before) == 6 and max(abs(a - b) for a, b in zip(before, after, strict=False)) < 1e-5
