"""The argv a trial runs, as click, typer and fire themselves parse it: init on each test repo, the
knobs set to values other than their defaults, and the library's own parser reading the command
line back. The training function is never called (torch is a stub: the repos only import it)."""

from __future__ import annotations

import functools
import inspect
import runpy
import shutil
import sys
from pathlib import Path
from unittest import mock

import click
import fire
from typer.main import get_command

from infrarsi.runner.command import build_argv
from infrarsi.stages.init import init

DATA = Path(__file__).parents[1] / "test_data" / "init"
VALUES = {"batch_size": 64, "accum_steps": 4, "lr": 0.5, "threads": 3, "compile": True}


TORCH_STUB = {name: mock.MagicMock() for name in ("torch", "torch.utils", "torch.utils.data")}


def _trial_argv(tmp_path: Path, name: str, command: list[str] | None, values: dict) -> tuple[dict, list[str]]:
    repo = tmp_path / name
    shutil.copytree(DATA / name, repo)
    result = init(repo, command=command, budget_bytes=2**30)
    assert result.ok, result.message
    argv = build_argv(result.contract, values, python="python")
    assert argv[:2] == ["python", "train.py"]
    with mock.patch.dict(sys.modules, TORCH_STUB):
        script = runpy.run_path(str(repo / "train.py"), run_name="knobs_test")
    return script, argv[2:]


def test_click_parses_the_trial_argv(tmp_path):
    values = {**VALUES, "verbose": True, "dtype": "bfloat16", "workers": 2}
    script, args = _trial_argv(tmp_path, "click_repo", ["python", "train.py", "train", "data"], values)
    assert args[:2] == ["train", "data"]
    group = script["cli"]
    assert isinstance(group, click.Group)
    params = group.commands["train"].make_context("train", args[1:]).params
    assert {k: params[k] for k in values} == values
    assert params["max_steps"] == 13  # the trial's step count, through the --steps flag


def test_click_group_command_is_named_in_inits_own_command(tmp_path):
    _, args = _trial_argv(tmp_path, "click_repo", None, {"batch_size": 64})
    assert args[0] == "train"


def test_typer_parses_the_trial_argv(tmp_path):
    script, args = _trial_argv(tmp_path, "typer_repo", ["python", "train.py", "data"], VALUES)
    params = get_command(script["app"]).make_context("train.py", args).params
    assert {k: params[k] for k in VALUES} == VALUES
    assert params["max_steps"] == 13
    # And the switch turned off again, as --no-compile.
    _, args = _trial_argv(tmp_path / "off", "typer_repo", ["python", "train.py", "data", "--compile"],
                          {"compile": False})
    assert get_command(script["app"]).make_context("train.py", args).params["compile"] is False


def test_fire_parses_the_trial_argv(tmp_path):
    values = {**VALUES, "run_name": "bfloat16"}
    script, args = _trial_argv(tmp_path, "fire_repo", None, values)
    assert args[0] == "train"  # fire builds the Trainer from the flags, then calls train()
    trainer = script["Trainer"]
    seen: dict = {}
    built = trainer.__init__

    @functools.wraps(built)
    def record(self, *a, **kw):
        seen.update(inspect.signature(built).bind(self, *a, **kw).arguments)

    trainer.__init__ = record
    trainer.train = lambda self: None
    fire.Fire(trainer, command=args)
    assert {k: seen[k] for k in values} == values
    assert seen["max_steps"] == 13
