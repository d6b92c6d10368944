"""Nested configs (infrarsi/knobs/nested.py): a config node built in code, its leaves read as knobs
with roles, the owner's job length read from a nested flag on the command, and a trial that moves
a leaf through its flag (tests/test_data/stages/nested); a Hydra YAML config tuned through
``key.sub=value`` overrides (tests/test_data/stages/hydra), composed from config groups
(tests/test_data/stages/hydra_groups); an ml_collections ConfigDict behind an absl config flag
(tests/test_data/stages/ml_collections)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from infrarsi.commandline import script_settings, without_flag
from infrarsi.contract import load_contract
from infrarsi.knobs.nested import nested_config
from infrarsi.knobs.source import ParsedFile, parse
from infrarsi.runner.command import build_argv, trial_knob_values
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.stages.doctor import doctor
from infrarsi.stages.init import init
from infrarsi.trials import Candidate, TrialStatus
from tests.stages.conftest import git_repo

NESTED = Path(__file__).parents[1] / "test_data" / "stages" / "nested"
HYDRA = Path(__file__).parents[1] / "test_data" / "stages" / "hydra"
HYDRA_GROUPS = Path(__file__).parents[1] / "test_data" / "stages" / "hydra_groups"
ML_COLLECTIONS = Path(__file__).parents[1] / "test_data" / "stages" / "ml_collections"
COMMAND = [sys.executable, "train.py", "--trainer.max_iters=12", "--trainer.batch_size=8"]


def _initialised(tmp_path: Path):
    repo = Path(shutil.copytree(NESTED, tmp_path / "job"))
    git_repo(repo)
    result = init(repo, command=COMMAND, budget_bytes=2**30)
    assert result.ok, result.message
    return repo, result.contract


def test_the_nodes_leaves_are_knobs_with_roles_and_the_command_sets_the_job(tmp_path):
    _, contract = _initialised(tmp_path)
    knobs = {k.name: k for k in contract.knobs}
    assert contract.workload.knob_style == "nested"
    assert {n: (k.role, k.default, k.flag) for n, k in knobs.items() if "." in n} == {
        "system.seed": ("workload", 7, "--system.seed"),
        "model.width": ("workload", 64, "--model.width"),
        "trainer.num_workers": ("dataloader_workers", 2, "--trainer.num_workers"),
        "trainer.batch_size": ("workload", 8, "--trainer.batch_size"),
        "trainer.max_iters": ("steps", 12, "--trainer.max_iters"),
        "trainer.learning_rate": ("workload", 1e-3, "--trainer.learning_rate"),  # get_config's, set later
    }
    assert knobs["trainer.num_workers"].tunable and knobs["trainer.num_workers"].source == "trainer.py:13"
    assert contract.workload.planned_steps == 12 and contract.workload.global_batch == 8


def test_overrides_without_dashes_are_settings_and_are_replaced_where_they_stand():
    args = ["trainer.max_iters=30", "+data.workers=2", "plain", "--lr=0.1"]
    assert [(a.flag, a.value) for a in script_settings(args)] == [
        ("trainer.max_iters", "30"), ("+data.workers", "2"), ("", "plain"), ("--lr", "0.1")]
    assert without_flag(args, {"trainer.max_iters"}, True) == (["+data.workers=2", "plain", "--lr=0.1"], 0)


@pytest.mark.e2e
def test_a_trial_moves_a_leaf_through_its_flag(tmp_path):
    repo, contract = _initialised(tmp_path)
    assert doctor(repo, repeats=2).ok
    contract = load_contract(repo)
    result = run_trial(TrialSpec(repo=repo, contract=contract,
                                 candidate=Candidate(knobs={**contract.defaults(), "trainer.num_workers": 0})))
    assert result.status is TrialStatus.OK, result.detail
    log = Path(result.log_path).read_text()
    assert "workers 0" in log and "workers 2" not in log


def test_a_hydra_config_is_read_by_path_and_tuned_through_overrides(tmp_path):
    repo = Path(shutil.copytree(HYDRA, tmp_path / "hydra"))
    git_repo(repo)
    result = init(repo, command=[sys.executable, "train.py", "trainer.max_iters=30"], budget_bytes=2**30)
    assert result.ok, result.message
    contract = result.contract
    knobs = {k.name: k for k in contract.knobs}
    assert {n: (k.role, k.default, k.flag) for n, k in knobs.items() if "." in n or n == "seed"} == {
        "seed": ("workload", 3, "seed"),
        "model.width": ("workload", 64, "model.width"),
        "model.dropout": ("workload", 0.0, "model.dropout"),
        "trainer.batch_size": ("workload", 16, "trainer.batch_size"),
        "trainer.num_workers": ("dataloader_workers", 2, "trainer.num_workers"),
        "trainer.max_iters": ("steps", 30, "trainer.max_iters"),
        "trainer.lr": ("workload", 0.001, "trainer.lr"),
    }
    assert contract.workload.planned_steps == 30 and knobs["trainer.num_workers"].tunable
    argv = build_argv(contract, trial_knob_values(contract, {"trainer.num_workers": 0}, 5))
    assert argv[1:] == ["train.py", "trainer.max_iters=5", "trainer.num_workers=0"]  # replaced where it stood


def _init_copy(fixture: Path, tmp_path: Path, command: list[str]):
    repo = Path(shutil.copytree(fixture, tmp_path / "job"))
    git_repo(repo)
    result = init(repo, command=[sys.executable, *command], budget_bytes=2**30)
    assert result.ok, result.message
    return result


def _table(contract) -> dict:
    return {k.name: (k.role, k.default, k.flag, k.source) for k in contract.knobs if k.role != "threads"}


def test_hydra_config_groups_are_composed_in_the_defaults_lists_order(tmp_path):
    # _self_ first: the group files win over the primary's own keys; ``override trainer: fast``
    # replaces ``/trainer: base`` where it stood (base's grad_clip is not read); model@net puts
    # model/small.yaml under net.; experiment/quick.yaml is ``# @package _global_``.
    result = _init_copy(HYDRA_GROUPS, tmp_path, ["train.py", "trainer.max_iters=30", "optimizer.lr=0.01"])
    contract = result.contract
    assert contract.workload.knob_style == "nested"
    assert _table(contract) == {
        "seed": ("workload", 11, "seed", "conf/experiment/quick.yaml"),
        "trainer.num_workers": ("dataloader_workers", 4, "trainer.num_workers", "conf/trainer/fast.yaml"),
        "trainer.log_every": ("logging", 10, "trainer.log_every", "conf/config.yaml"),
        "optimizer.lr": ("workload", 0.01, "optimizer.lr", "conf/optimizer/adam.yaml"),
        "optimizer.weight_decay": ("workload", 0.01, "optimizer.weight_decay", "conf/optimizer/adam.yaml"),
        "net.width": ("workload", 64, "net.width", "conf/model/small.yaml"),
        "net.dropout": ("workload", 0.1, "net.dropout", "conf/model/small.yaml"),
        "trainer.batch_size": ("workload", 32, "trainer.batch_size", "conf/trainer/fast.yaml"),
        "trainer.max_iters": ("steps", 30, "trainer.max_iters", "conf/experiment/quick.yaml"),
    }
    assert contract.workload.planned_steps == 30 and contract.knob("trainer.num_workers").tunable
    assert ("conf/logging/wandb.yaml, which conf/config.yaml's defaults list or the command chooses for config "
            "group logging, is not in the repository: nothing read from it") in result.warnings
    argv = build_argv(contract, trial_knob_values(contract, {"trainer.num_workers": 0}, 5))
    assert argv[1:] == ["train.py", "trainer.max_iters=5", "optimizer.lr=0.01", "trainer.num_workers=0"]


def test_hydra_group_choices_on_the_command_and_the_primary_keys_last_without_self(tmp_path):
    repo = tmp_path / "src"
    shutil.copytree(HYDRA_GROUPS, repo)
    (repo / "conf" / "config.yaml").write_text(
        "defaults: [{optimizer: adam}, {model@net: small}, {override trainer: fast}, {optional logging: wandb},"
        " {experiment: quick}]\nseed: 3\ntrainer: {num_workers: 1, log_every: 10}\n")
    # model@net=large addresses the entry model@net as Hydra does; +extra=none adds a group the list lacks.
    (repo / "conf" / "extra").mkdir()
    (repo / "conf" / "extra" / "none.yaml").write_text("# @package _group_\nlabel_smoothing: 0.0\n")
    result = _init_copy(repo, tmp_path, ["train.py", "model@net=large", "optimizer=sgd", "trainer.max_iters=30",
                                         "+extra=none"])
    contract = result.contract
    assert _table(contract) == {
        "optimizer.lr": ("workload", 0.1, "optimizer.lr", "conf/optimizer/sgd.yaml"),
        "optimizer.momentum": ("workload", 0.9, "optimizer.momentum", "conf/optimizer/sgd.yaml"),
        "net.width": ("workload", 256, "net.width", "conf/model/large.yaml"),
        "net.dropout": ("workload", 0.1, "net.dropout", "conf/model/large.yaml"),
        "trainer.batch_size": ("workload", 32, "trainer.batch_size", "conf/trainer/fast.yaml"),
        "trainer.num_workers": ("dataloader_workers", 1, "trainer.num_workers", "conf/config.yaml"),
        "seed": ("workload", 3, "seed", "conf/config.yaml"),
        "trainer.max_iters": ("steps", 30, "trainer.max_iters", "conf/experiment/quick.yaml"),
        "trainer.log_every": ("logging", 10, "trainer.log_every", "conf/config.yaml"),
        "extra.label_smoothing": ("workload", 0.0, "extra.label_smoothing", "conf/extra/none.yaml"),
    }
    assert not [w for w in result.warnings if "logging" in w]  # an optional group's file may be missing
    assert [(s["name"], s["reason"]) for s in result.skipped] == [
        ("model@net", "chooses config group model's file conf/model/large.yaml"),
        ("optimizer", "chooses config group optimizer's file conf/optimizer/sgd.yaml"),
        ("extra", "chooses config group extra's file conf/extra/none.yaml"),
    ]
    argv = build_argv(contract, trial_knob_values(contract, {"trainer.num_workers": 0}, 5))
    assert argv[1:] == ["train.py", "model@net=large", "optimizer=sgd", "trainer.max_iters=5", "+extra=none",
                        "trainer.num_workers=0"]


_ML_KNOBS = {
    "config.seed": ("workload", 0, "--config.seed", "configs/default.py:15"),
    "config.batch_size": ("workload", 32, "--config.batch_size", "configs/default.py:16"),
    "config.num_train_steps": ("steps", 30, "--config.num_train_steps", "configs/default.py:17"),
    "config.optim.lr": ("workload", 0.1, "--config.optim.lr", "configs/default.py:19"),
    "config.optim.momentum": ("workload", 0.9, "--config.optim.momentum", "configs/default.py:20"),
    "config.data.num_workers": ("dataloader_workers", 2, "--config.data.num_workers", "configs/default.py:8"),
    "config.data.shuffle": ("workload", True, "--config.data.shuffle", "configs/default.py:9"),
    "config.model.width": ("workload", 64, "--config.model.width", "configs/default.py:22"),
    "config.model.depth": ("workload", 2, "--config.model.depth", "configs/default.py:22"),
}


def test_an_ml_collections_config_file_is_read_from_the_commands_config_flag(tmp_path):
    command = ["main.py", "--config=configs/default.py", "--config.batch_size=32", "--config.num_train_steps=30"]
    result = _init_copy(ML_COLLECTIONS, tmp_path, command)
    contract = result.contract
    assert contract.workload.knob_style == "nested"
    assert _table(contract) == _ML_KNOBS
    assert contract.workload.planned_steps == 30 and contract.workload.global_batch == 32
    assert contract.knob("config.data.num_workers").tunable
    assert [(s["name"], s["reason"]) for s in result.skipped] == [("config", "names the config file configs/default.py")]
    argv = build_argv(contract, trial_knob_values(contract, {"config.data.num_workers": 0}, 5))
    assert argv[1:] == ["main.py", "--config=configs/default.py", "--config.batch_size=32",
                        "--config.num_train_steps=5", "--config.data.num_workers=0"]


def test_an_ml_collections_config_of_dict_literals_and_the_flags_default_file(tmp_path):
    small = _init_copy(ML_COLLECTIONS, tmp_path / "small", ["main.py", "--config", "configs/small.py:arg"]).contract
    assert {n: (d, s) for n, (_, d, _, s) in _table(small).items()} == {
        "config.seed": (0, "configs/small.py:8"),
        "config.batch_size": (32, "configs/small.py:9"),
        "config.num_train_steps": (100, "configs/small.py:10"),
        "config.optim.lr": (0.05, "configs/small.py:11"),
        "config.optim.momentum": (0.9, "configs/small.py:11"),
        "config.data.num_workers": (1, "configs/small.py:13"),
        "config.data.shuffle": (False, "configs/small.py:13"),
        "config.model.width": (32, "configs/small.py:14"),
        "config.model.depth": (1, "configs/small.py:14"),
    }
    default = _init_copy(ML_COLLECTIONS, tmp_path / "default", ["main.py", "--config.num_train_steps=30"]).contract
    assert _table(default) == {**_ML_KNOBS, "config.batch_size": ("workload", 128, "--config.batch_size",
                                                                 "configs/default.py:16")}


def test_an_ml_collections_config_dict_built_in_the_script(tmp_path):
    contract = _init_copy(ML_COLLECTIONS, tmp_path, ["main_dict.py", "--cfg.optim.lr=0.02",
                                                     "--cfg.num_train_steps=30"]).contract
    assert _table(contract) == {
        "cfg.seed": ("workload", 1, "--cfg.seed", "main_dict.py:12"),
        "cfg.batch_size": ("workload", 64, "--cfg.batch_size", "main_dict.py:12"),
        "cfg.num_train_steps": ("steps", 30, "--cfg.num_train_steps", "main_dict.py:12"),
        "cfg.optim.lr": ("workload", 0.02, "--cfg.optim.lr", "main_dict.py:13"),
        "cfg.optim.momentum": ("workload", 0.9, "--cfg.optim.momentum", "main_dict.py:13"),
        "cfg.data.num_workers": ("dataloader_workers", 2, "--cfg.data.num_workers", "main_dict.py:14"),
        "cfg.data.shuffle": ("workload", True, "--cfg.data.shuffle", "main_dict.py:14"),
        "cfg.model.width": ("workload", 32, "--cfg.model.width", "main_dict.py:15"),
        "cfg.model.depth": ("workload", 1, "--cfg.model.depth", "main_dict.py:15"),
    }
    argv = build_argv(contract, trial_knob_values(contract, {"cfg.data.num_workers": 0}, 5))
    assert argv[1:] == ["main_dict.py", "--cfg.optim.lr=0.02", "--cfg.num_train_steps=5", "--cfg.data.num_workers=0"]


def test_a_config_file_the_command_names_must_exist(tmp_path):
    repo = Path(shutil.copytree(ML_COLLECTIONS, tmp_path / "job"))
    git_repo(repo)
    result = init(repo, command=[sys.executable, "main.py", "--config=configs/missing.py"], budget_bytes=2**30)
    assert not result.ok
    assert result.message == ("main.py:10: --config loads configs/missing.py (from the command), which is not a "
                              "file of the repository")


def _read(repo: Path, entry: str, args: list[str]):
    return nested_config(repo, [ParsedFile(entry, parse(repo, entry))], args)


def test_a_defaults_lists_other_forms(tmp_path):
    # A config by name at the root, a null group, mandatory groups (one the command fills), an
    # entry that is neither form, several options (not read), and a missing file the command chose.
    conf = tmp_path / "conf"
    for rel, text in {"base.yaml": "width: 8\n", "config.yaml": "defaults: [base, {db: null}, {opt: '???'},"
                      " [bad], {model: tiny}, {loss: '???'}, {aug: [a, b]}]\nwidth: 16\n", "opt/sgd.yaml": "lr: 0.5\n", "model/.keep": ""}.items():
        (conf / rel).parent.mkdir(parents=True, exist_ok=True)
        (conf / rel).write_text(text)
    (tmp_path / "app.py").write_text(
        'import hydra\n\n@hydra.main("conf", "config")\ndef main(cfg):\n    pass\n')
    found = _read(tmp_path, "app.py", ["opt=sgd", "model=huge"])
    assert [(s.path, s.value, s.source, s.flag) for s in found.settings] == [
        ("width", 16, "conf/config.yaml", "width"), ("opt.lr", 0.5, "conf/opt/sgd.yaml", "opt.lr")]
    assert found.warnings == [
        "conf/config.yaml: defaults entry ['bad'] is not read (not a config name or `group: option`)",
        "conf/model/huge.yaml, which conf/config.yaml's defaults list or the command chooses for config group "
        "model, is not in the repository: nothing read from it",
        "conf/config.yaml: config group loss is mandatory (???) and the command chooses no file for it: nothing read "
        "for it",
        "conf/config.yaml: config group aug's choice ['a', 'b'] is not one file name: nothing read for it",
    ]
    assert found.choosers == {"opt": "chooses config group opt's file conf/opt/sgd.yaml",
                              "model": "chooses config group model's file conf/model/huge.yaml"}


def test_a_config_flag_by_keywords_and_one_init_cannot_read(tmp_path):
    shutil.copytree(ML_COLLECTIONS / "configs", tmp_path / "configs")
    (tmp_path / "run.py").write_text("from ml_collections import config_flags\n"
                                     'C = config_flags.DEFINE_config_file(name="exp", default="configs/small.py")\n')
    found = _read(tmp_path, "run.py", [])
    assert [(s.path, s.flag) for s in found.settings][:2] == [("exp.seed", "--exp.seed"),
                                                              ("exp.batch_size", "--exp.batch_size")]
    assert len(found.settings) == 9 and not found.choosers and not found.warnings
    (tmp_path / "run.py").write_text("from ml_collections import config_flags\n"
                                     'C = config_flags.DEFINE_config_dict("exp", load())\n')
    assert _read(tmp_path, "run.py", []).warnings == [
        "run.py:2: no setting of --exp's ConfigDict is read (init reads a get_config() that fills one, and dict "
        "literals): none is a knob"]
