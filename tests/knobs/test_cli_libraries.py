"""Knobs of click, typer and fire commands (infrarsi/knobs/cli_libraries.py), and their roles from
what the command function does with each parameter: static, nothing run."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from infrarsi.contract import Workload
from infrarsi.knobs.discover import discover
from infrarsi.knobs.entry import find_entry
from infrarsi.knobs.roles import assign_roles
from infrarsi.knobs.source import ParsedFile, parse

DATA = Path(__file__).parents[1] / "test_data" / "init"


def _found(repo: Path):
    return discover(repo, find_entry(repo))


def _knobs(name: str):
    found = _found(DATA / name)
    return found, {k.name: k for k in found.knobs}


def _shape(knob) -> tuple:
    return knob.type, knob.default, knob.flag, knob.flag_style


def test_click_group_command_options():
    found, knobs = _knobs("click_repo")
    assert (found.style, found.subcommand) == ("click", "train")
    assert found.warnings == ["click command 'train' read (of train, evaluate): trials pass its name before the flags"]
    assert list(knobs) == ["batch_size", "accum_steps", "lr", "max_steps", "threads", "workers", "compile",
                           "verbose", "dtype"]
    assert _shape(knobs["batch_size"]) == ("int", 32, "--batch-size", "eq")
    assert (knobs["batch_size"].help, knobs["batch_size"].source) == ("examples per forward pass", "train.py:14")
    assert _shape(knobs["lr"]) == ("float", 1e-3, "--lr", "eq")
    assert _shape(knobs["max_steps"]) == ("int", 100, "--steps", "eq")  # the explicit name, click's IntRange
    assert _shape(knobs["workers"]) == ("int", 0, "--workers", "eq")  # typed from the default
    assert _shape(knobs["compile"]) == ("bool", False, "--compile", "bool_optional")
    assert _shape(knobs["verbose"]) == ("bool", False, "--verbose", "store_true")
    assert knobs["dtype"].choices == ("float32", "bfloat16")
    assert {k.name: k.note for k in found.skipped} == {
        "data_dir": "positional argument: the workload command must supply it",
        "tags": "takes several values or counts",
    }
    assert {k.receiver for k in found.knobs} == {"train.py:train"}


def test_typer_command_parameters():
    found, knobs = _knobs("typer_repo")
    assert (found.style, found.subcommand, found.warnings) == ("typer", "", [])
    assert list(knobs) == ["batch_size", "accum_steps", "lr", "max_steps", "threads", "compile"]
    assert _shape(knobs["batch_size"]) == ("int", 32, "--batch-size", "eq")
    assert _shape(knobs["accum_steps"]) == ("int", 2, "--accum-steps", "eq")  # Annotated[int, typer.Option(…)]
    assert knobs["accum_steps"].help == "micro-batches per optimizer step"
    assert _shape(knobs["lr"]) == ("float", 1e-3, "--learning-rate", "eq")  # typer.Option(default, "--flag")
    assert _shape(knobs["compile"]) == ("bool", False, "--compile", "bool_optional")
    assert {k.name: k.note for k in found.skipped} == {
        "data_dir": "positional argument: the workload command must supply it",
        "resume": "default is None",
    }


def test_fire_class_init_parameters():
    found, knobs = _knobs("fire_repo")
    assert (found.style, found.subcommand) == ("fire", "train")  # fire builds Trainer, then calls its train()
    assert list(knobs) == ["batch_size", "accum_steps", "lr", "max_steps", "threads", "compile", "run_name"]
    assert _shape(knobs["batch_size"]) == ("int", 32, "--batch_size", "eq")
    assert _shape(knobs["lr"]) == ("float", 1e-3, "--lr", "eq")
    assert _shape(knobs["compile"]) == ("bool", False, "--compile", "eq")  # fire reads --compile=True/False
    assert {k.name: k.note for k in found.skipped} == {"device": "default is None"}
    assert {k.receiver for k in found.knobs} == {"train.py:Trainer.__init__"}


@pytest.mark.parametrize("repo", ["click_repo", "typer_repo", "fire_repo"])
def test_roles_follow_the_command_functions_parameters(repo):
    found = _found(DATA / repo)
    readers = [ParsedFile(rel, parse(DATA / repo, rel)) for rel in found.files]
    roles = assign_roles(readers, found.knobs, found.style)
    assert {name: roles[name].rule.role for name in ("batch_size", "accum_steps", "lr", "max_steps", "threads",
                                                      "compile")} == {
        "batch_size": "micro_batch", "accum_steps": "grad_accum", "lr": "workload", "max_steps": "steps",
        "threads": "threads", "compile": "compile",
    }
    # Each from where the parameter's value acts in train.py, not from its name.
    assert all("train.py:" in roles[name].why for name in ("batch_size", "accum_steps", "lr", "threads"))


def test_the_same_name_elsewhere_is_not_the_parameter(tmp_path):
    # A `.threads` attribute outside the command is no source of the command's `threads`.
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import fire
        import torch

        def main(threads=2):
            print(threads)

        class Other:
            threads = 1

        torch.set_num_threads(Other().threads)

        if __name__ == "__main__":
            fire.Fire(main)
    """))
    found = _found(tmp_path)
    readers = [ParsedFile(rel, parse(tmp_path, rel)) for rel in found.files]
    assert assign_roles(readers, found.knobs, found.style)["threads"].why == "name"


def test_a_group_without_a_train_command_reads_nothing(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import fire

        def fit(lr=0.1):
            pass

        def evaluate(batch_size=8):
            pass

        if __name__ == "__main__":
            fire.Fire({"fit": fit, "evaluate": evaluate})
    """))
    found = _found(tmp_path)
    assert found.knobs == []
    assert "the fire commands (fit, evaluate) include none named 'train'" in found.warnings[0]


@pytest.mark.parametrize("script", [
    """
    import fire

    def train(lr=0.1):
        pass

    if __name__ == "__main__":
        fire.Fire({"train": train, "evaluate": print})
    """,
    """
    import click

    @click.group()
    def cli():
        pass

    @click.command()
    @click.option("--lr", default=0.1)
    def train(lr):
        pass

    cli.add_command(train)

    if __name__ == "__main__":
        cli()
    """,
])
def test_a_groups_train_command_is_named_before_its_flags(tmp_path, script):
    (tmp_path / "train.py").write_text(textwrap.dedent(script))
    found = _found(tmp_path)
    assert (found.subcommand, [(k.name, k.default) for k in found.knobs]) == ("train", [("lr", 0.1)])


def test_switches_the_command_line_cannot_turn_off_are_skipped(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import click

        @click.command()
        @click.option("--shuffle", is_flag=True, default=True)
        @click.option("--fast/--slow", default=False)
        @click.option("-b", default=4)
        def main(shuffle, fast, b):
            pass

        if __name__ == "__main__":
            main()
    """))
    found = _found(tmp_path)
    assert (found.style, found.subcommand, found.knobs) == ("click", "", [])
    assert {k.name: k.note for k in found.skipped} == {
        "shuffle": "a switch that is on by default and has no off switch",
        "fast": "its off switch --slow is not --no-fast",
        "b": "only a short option: click reads '-x=v' as the value '=v'",
    }


@pytest.mark.parametrize("style", ["click", "typer", "fire"])
def test_the_contract_accepts_the_cli_styles(style):
    workload = Workload(entry="train.py", command=["python", "train.py"], knob_style=style, tokens_per_step=0,
                        seq_len=0, global_batch=0, seed=0, warmup_steps=1, measured_steps=1, planned_steps=1)
    assert workload.knob_style == style
