import sys

from infrarsi.contract import Knob
from infrarsi.runner.command import build_argv, resolve_launcher, source_knobs, trial_knob_values

from .conftest import knobs, make_contract


def contract_for(tmp_path, command, args=None, extra=()):
    (tmp_path / "helpers.py").write_text("")
    contract = make_contract(tmp_path, knob_list=[*knobs(), *extra])
    contract.workload.command = command
    contract.workload.args = args or {}
    return contract


def test_python_and_torchrun_run_with_our_interpreter():
    assert resolve_launcher(["python", "train.py"]) == [sys.executable, "train.py"]
    assert resolve_launcher(["torchrun", "--nproc_per_node=2", "train.py"]) == [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "train.py"]
    assert resolve_launcher(["/opt/bin/run.sh", "x"]) == ["/opt/bin/run.sh", "x"]


def test_steps_fixed_args_and_knobs_in_order(tmp_path):
    contract = contract_for(tmp_path, ["python", "train.py"], args={"eval_interval": 0, "max_iters": 99})
    values = trial_knob_values(contract, {"step_s": 0.5, "in_child": True, "max_iters": 3}, steps=7)
    argv = build_argv(contract, values)
    # The step count wins over the candidate and the fixed args; store_true renders bare.
    assert argv == [sys.executable, "train.py", "--eval_interval=0", "--step_s=0.5", "--in_child", "--max_iters=7"]


def test_launcher_knob_goes_before_the_script_and_replaces_the_default(tmp_path):
    nproc = Knob(name="nproc", role="nproc_per_node", type="int", default=1, flag="--nproc_per_node")
    contract = contract_for(tmp_path, ["torchrun", "--nproc_per_node", "1", "train.py"], extra=[nproc])
    argv = build_argv(contract, {"nproc": 2, "step_s": 0.1})
    assert argv == [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "train.py", "--step_s=0.1"]


def test_flagless_knobs_are_grouped_by_their_defining_file(tmp_path):
    extra = [
        Knob(name="lr", role="unknown", type="float", default=1e-3, flag="", source="config.py:12"),
        Knob(name="warm", role="unknown", type="int", default=0, flag=""),
    ]
    contract = contract_for(tmp_path, ["python", "train.py"], extra=extra)
    values = {"lr": 2e-3, "warm": 5, "step_s": 0.1}
    assert source_knobs(contract, values) == {"config.py": {"lr": 2e-3}, "train.py": {"warm": 5}}
    assert "--lr=0.002" not in build_argv(contract, values)


def test_local_ranks_come_from_torchrun_nproc_and_are_unknown_under_accelerate(tmp_path):
    from infrarsi.runner.command import local_ranks

    contract = contract_for(tmp_path, ["python", "train.py"])
    assert local_ranks(contract, build_argv(contract, {})) == 1
    contract.workload.launcher = "accelerate"
    contract.workload.command = ["accelerate", "launch", "train.py"]
    assert local_ranks(contract, build_argv(contract, {})) is None
    contract.workload.launcher = "torchrun"
    for command, expected in [(["torchrun", "--nproc_per_node=4", "train.py"], 4),
                              (["torchrun", "--nproc-per-node", "2", "train.py"], 2),
                              (["torchrun", "--nproc_per_node=auto", "train.py"], None),
                              (["torchrun", "train.py", "--nproc_per_node=8"], 1)]:
        contract.workload.command = command
        assert local_ranks(contract, build_argv(contract, {})) == expected, command


def test_a_knob_replaces_the_commands_own_setting_in_any_spelling(tmp_path):
    extra = [
        Knob(name="lr", role="unknown", type="float", default=0.1, flag="--lr"),
        Knob(name="cuda", role="unknown", type="bool", default=True, flag="--cuda", flag_style="bool_optional"),
        Knob(name="fast", role="unknown", type="bool", default=True, flag="--fast", flag_style="store_true"),
    ]
    contract = contract_for(tmp_path, ["python", "train.py", "--batch_size", "8", "--lr=0.1", "--cuda", "--fast",
                                       "data.txt"], extra=extra)
    argv = build_argv(contract, {"batch_size": 16, "lr": 0.5, "cuda": False, "fast": False}, python="PY")
    assert argv == ["PY", "train.py", "--batch_size=16", "--lr=0.5", "--no-cuda", "data.txt"]
    # A flag the command does not have is appended; nothing is set twice.
    argv = build_argv(contract, {"step_s": 0.5}, python="PY")
    assert argv == ["PY", "train.py", "--batch_size", "8", "--lr=0.1", "--cuda", "--fast", "data.txt", "--step_s=0.5"]
