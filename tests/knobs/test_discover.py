"""Discovery on small repos in the three knob styles, and on malformed ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from infrarsi.knobs.discover import discover
from infrarsi.knobs.entry import find_entry
from infrarsi.knobs.source import DiscoveryError

DATA = Path(__file__).parents[1] / "test_data" / "init"


def _found(name: str):
    repo = DATA / name
    entry = find_entry(repo)
    return entry, discover(repo, entry)


def _by_name(found):
    return {k.name: k for k in found.knobs}


def test_argparse_knobs_with_types_defaults_choices_help_and_flags():
    entry, found = _found("argparse_repo")
    assert (entry.path, entry.launcher, found.style) == ("train.py", "python", "argparse")
    knobs = _by_name(found)
    assert set(knobs) == {
        "batch_size", "micro_batch_size", "block_size", "n_layer", "n_embd", "vocab_size", "lr", "seed",
        "max_iters", "threads", "compile", "fused", "dtype", "optimizer_impl", "num_workers", "out_dir",
    }
    mbs = knobs["micro_batch_size"]
    assert (mbs.type, mbs.default, mbs.flag, mbs.help, mbs.source) == (
        "int", 8, "--micro-batch-size", "sequences per forward pass", "train.py:13")
    assert (knobs["lr"].type, knobs["lr"].default) == ("float", 3e-4)
    assert (knobs["compile"].default, knobs["compile"].flag_style) == (False, "store_true")
    assert (knobs["fused"].default, knobs["fused"].flag, knobs["fused"].flag_style) == (True, "--no-fused", "store_false")
    assert knobs["dtype"].choices == ("float32", "bfloat16")
    assert knobs["optimizer_impl"].choices == ("for-loop", "foreach", "fused")
    assert [(k.name, k.note) for k in found.skipped] == [("resume", "default is None")]
    assert found.files == ["train.py", "data.py", "model.py"]


def test_globals_knobs_before_the_configurator():
    entry, found = _found("globals_repo")
    assert found.style == "globals"
    knobs = _by_name(found)
    assert "config_keys" not in knobs and "iter_num" not in knobs  # a list, and after the configurator
    assert knobs["batch_size"].help == "if gradient_accumulation_steps > 1, this is the micro-batch size"
    assert (knobs["compile"].flag, knobs["compile"].flag_style) == ("--compile", "eq")
    assert knobs["learning_rate"].default == 6e-4
    skipped = {k.name: k.note for k in found.skipped}
    assert skipped == {"dtype": "default is computed at run time"}


def test_dataclass_fields_are_knobs_written_in_source():
    _, found = _found("dataclass_repo")
    assert found.style == "dataclass"
    knobs = _by_name(found)
    assert knobs["global_batch_size"].source == "config.py:6"
    assert knobs["run_name"].default == "baseline"  # field(default=...)
    assert all(k.flag == "" for k in knobs.values())
    assert {k.name for k in found.skipped} == {"tags"}
    assert any("defaults in source" in w for w in found.warnings)


def test_torchrun_script_and_boolean_optional_action():
    entry, found = _found("torchrun_repo")
    assert (entry.launcher, entry.launcher_why) == ("torchrun", "calls init_process_group")
    knobs = _by_name(found)
    assert knobs["gradient_as_bucket_view"].flag_style == "bool_optional"
    assert knobs["static_graph"].flag_style == "store_true"


# Malformed input, for each style: a syntax error in the file that declares the knobs, and a repo
# whose script has no entry point.
KNOB_FILES = {"argparse_repo": "train.py", "globals_repo": "train.py", "dataclass_repo": "config.py"}


@pytest.mark.parametrize("style_repo", sorted(KNOB_FILES))
def test_syntax_error_names_file_and_line(tmp_path, style_repo):
    repo = tmp_path / style_repo
    shutil.copytree(DATA / style_repo, repo)
    path = repo / KNOB_FILES[style_repo]
    lines = path.read_text().splitlines()
    lines.insert(3, "def broken(:")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DiscoveryError, match=rf"SyntaxError in {KNOB_FILES[style_repo]} line 4"):
        discover(repo, find_entry(repo))


@pytest.mark.parametrize("style_repo", sorted(KNOB_FILES))
def test_no_entry_point(tmp_path, style_repo):
    repo = tmp_path / style_repo
    shutil.copytree(DATA / style_repo, repo)
    train = repo / "train.py"
    text = train.read_text()
    # No `__main__` guard and no top-level training loop left.
    text = text.split('if __name__ == "__main__":')[0].replace("loss.backward()", "loss.detach()")
    train.write_text(text)
    with pytest.raises(DiscoveryError, match="no entry point found"):
        find_entry(repo)


def test_syntax_error_repo_and_empty_repo():
    with pytest.raises(DiscoveryError, match=r"SyntaxError in train.py line 6: '\(' was never closed"):
        find_entry(DATA / "syntax_error")
    with pytest.raises(DiscoveryError, match="Pass the script with --entry FILE"):
        find_entry(DATA / "no_entry")


def test_two_alike_entry_points_ask_for_entry(tmp_path):
    repo = tmp_path / "r"
    shutil.copytree(DATA / "torchrun_repo", repo)
    shutil.copy(repo / "train.py", repo / "train_b.py")
    with pytest.raises(DiscoveryError, match="train.py, train_b.py"):
        find_entry(repo)
    assert find_entry(repo, "train_b.py").path == "train_b.py"
    with pytest.raises(DiscoveryError, match="missing.py does not exist"):
        find_entry(repo, "missing.py")
