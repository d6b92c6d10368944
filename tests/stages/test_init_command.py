"""`infrarsi init PATH -- <command…>`: the owner's command in the contract, its arguments and config
files as the baseline, entry loops wherever they are, a device this machine lacks, and every bad
input ending in one line and exit 2. Real files in tmp_path; a real subprocess where the command
must actually start."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from infrarsi.cli import main as cli_main
from infrarsi.contract import contract_path, load_contract
from infrarsi.runner.command import build_argv, resolve_launcher, source_knobs, trial_knob_values
from infrarsi.runner.workspace import Workspace
from infrarsi.stages.init import init

INFRARSI = [sys.executable, "-c", "import sys; from infrarsi.cli import main; sys.exit(main())"]
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has CUDA: nothing to move")

CONFIGURATOR = """\
import sys
from ast import literal_eval
for arg in sys.argv[1:]:
    if '=' not in arg:
        exec(open(arg).read())
    else:
        key, val = arg.split('=')
        key = key[2:]
        try:
            attempt = literal_eval(val)
        except (SyntaxError, ValueError):
            attempt = val
        globals()[key] = attempt
"""

GLOBALS_TRAIN = """\
import torch
batch_size = 16
block_size = 32
n_layer = 4
max_iters = 100
device = 'cpu'
compile = True
seed = 1
exec(open('configurator.py').read())
torch.manual_seed(seed)
w = torch.zeros(n_layer, device=device, requires_grad=True)
for it in range(max_iters):
    loss = (w - 1).pow(2).sum() * batch_size * block_size
    loss.backward()
print("ran", batch_size, n_layer, device, compile, max_iters)
"""

ARGPARSE_TRAIN = """\
import argparse
import json
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--config", type=str, default="")
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--block_size", type=int, default=16)
parser.add_argument("--device", type=str, default="cuda")
parser.add_argument("--max_iters", type=int, default=50)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()


def main():
    w = torch.zeros(2, device=args.device, requires_grad=True)
    for _ in range(args.max_iters):
        loss = (w - args.lr).pow(2).sum()
        loss.backward()
    print("ran on", args.device)


if __name__ == "__main__":
    main()
"""


def write(repo: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return repo


def snapshot(repo: Path) -> dict[str, bytes]:
    return {p.relative_to(repo).as_posix(): p.read_bytes() for p in repo.rglob("*") if p.is_file()}


def run_baseline(repo: Path, contract) -> subprocess.CompletedProcess:
    """The baseline trial's command, run for real from the contract's cwd with its environment."""
    values = trial_knob_values(contract, {}, contract.workload.total_steps)
    assert not source_knobs(contract, values)
    argv = build_argv(contract, values)
    env = {**os.environ, **contract.workload.env}
    return subprocess.run(argv, cwd=repo / contract.workload.cwd, env=env, capture_output=True, text=True,
                          timeout=120)


# ---------------------------------------------------------------- the command is the baseline


def test_positional_python_config_and_flags_are_the_baseline(tmp_path):
    repo = write(tmp_path / "nano", {
        "train.py": GLOBALS_TRAIN, "configurator.py": CONFIGURATOR,
        "config/small.py": "batch_size = 4\nn_layer = 2\nout_dir = 'out-small'\n",
    })
    command = ["python", "train.py", "config/small.py", "--device=cpu", "--compile=False", "--batch_size=8"]
    result = init(repo, command=command, budget_bytes=2**30)
    assert result.ok, result.message
    c = load_contract(repo)
    w = c.workload
    assert (w.command, w.command_from, w.launcher, w.knob_style, w.cwd) == (command, "user", "python", "globals", ".")
    # The config file sets n_layer; the later --batch_size=8 wins over its batch_size = 4.
    defaults = c.defaults()
    assert (defaults["batch_size"], defaults["n_layer"], defaults["compile"], defaults["device"]) == (8, 2, False, "cpu")
    assert (w.global_batch, w.seq_len, w.tokens_per_step) == (8, 32, 256)
    # A trial's flags replace the command's own settings in place, never a duplicate.
    argv = build_argv(c, trial_knob_values(c, {"compile": True}, w.total_steps), python="PY")
    assert argv == ["PY", "train.py", "config/small.py", "--device=cpu", "--compile=True", "--batch_size=8",
                    "--max_iters=13"]
    done = run_baseline(repo, c)
    assert done.returncode == 0, done.stderr
    assert "ran 8 2 cpu False 13" in done.stdout


def test_config_yaml_and_json_settings_are_knobs_written_into_the_files(tmp_path):
    repo = write(tmp_path / "cfg", {
        "train.py": ARGPARSE_TRAIN.replace('default="cuda"', 'default="cpu"'),
        "configs/run.yaml": "batch_size: 4\noptim:\n  lr: 0.5\n  warmup: 10\nname: demo\n",
        "configs/run.json": json.dumps({"dropout": 0.1, "data": {"workers": 2}}),
    })
    before = snapshot(repo)
    command = ["python", "train.py", "--config", "configs/run.yaml", "--lr=0.25", "--batch_size", "4"]
    result = init(repo, command=command, budget_bytes=2**30)
    assert result.ok, result.message
    c = result.contract
    # --lr is given on the command line too: the flag stays, with the command's value.
    assert (c.knob("lr").default, c.knob("lr").flag) == (0.25, "--lr")
    assert (c.knob("batch_size").default, c.knob("batch_size").flag) == (4, "--batch_size")
    assert (c.knob("warmup").default, c.knob("warmup").flag, c.knob("warmup").source) == (10, "", "configs/run.yaml:warmup")
    assert c.knob("config").default == "configs/run.yaml"
    assert snapshot(repo) == {**before, **{k: v for k, v in snapshot(repo).items() if k.startswith(".infrarsi/")}}
    # A trial writes a file-only setting into its copy of the file.
    workspace = Workspace(repo)
    try:
        assert workspace.write_knobs(source_knobs(c, {"warmup": 3})) is None
        assert "warmup: 3" in (workspace.root / "configs/run.yaml").read_text()
        assert (repo / "configs/run.yaml").read_bytes() == before["configs/run.yaml"]
    finally:
        workspace.remove()

    json_cmd = ["python", "train.py", "--config=configs/run.json"]
    result = init(repo, command=json_cmd, budget_bytes=2**30)
    assert result.ok, result.message
    assert result.contract.knob("workers").source == "configs/run.json:workers"


def test_python_dash_m_runs_the_module_from_its_package(tmp_path):
    repo = write(tmp_path / "pkgrepo", {
        "pkg/__init__.py": "",
        "pkg/train.py": ARGPARSE_TRAIN.replace('default="cuda"', 'default="cpu"'),
    })
    result = init(repo, command=["python", "-m", "pkg.train", "--batch_size", "4"], budget_bytes=2**30)
    assert result.ok, result.message
    w = result.contract.workload
    assert (w.entry, w.module, w.launcher) == ("pkg/train.py", "pkg.train", "python")
    assert result.contract.knob("batch_size").default == 4
    argv = build_argv(result.contract, trial_knob_values(result.contract, {}, 13), python="PY")
    assert argv == ["PY", "-m", "pkg.train", "--batch_size", "4", "--max_iters=13"]
    done = run_baseline(repo, result.contract)
    assert done.returncode == 0, done.stderr


def test_torchrun_command_keeps_its_launcher_options(tmp_path):
    repo = write(tmp_path / "ddp", {"train.py": ARGPARSE_TRAIN.replace('default="cuda"', 'default="cpu"')})
    command = ["torchrun", "--standalone", "--nproc_per_node", "2", "train.py", "--batch_size=8"]
    result = init(repo, command=command, budget_bytes=2**30)
    assert result.ok, result.message
    c = result.contract
    assert (c.workload.launcher, c.knob("nproc_per_node").default) == ("torchrun", 2)
    argv = build_argv(c, trial_knob_values(c, {"nproc_per_node": 1}, 13), python="PY")
    assert argv == ["PY", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "train.py",
                    "--batch_size=8", "--max_iters=13"]


def test_env_prefix_and_cwd_are_kept(tmp_path):
    repo = write(tmp_path / "nested", {
        "jobs/train.py": "import os\nimport torch\nassert os.environ['DATA_ROOT'] == 'shared'\n"
                         "x = torch.ones(1, requires_grad=True)\n(x * 2).sum().backward()\n",
        "jobs/shared/README": "data",
    })
    result = init(repo, command=["DATA_ROOT=shared", "python", "train.py"], cwd=repo / "jobs", budget_bytes=2**30)
    assert result.ok, result.message
    w = result.contract.workload
    assert (w.env, w.cwd, w.entry, w.command) == ({"DATA_ROOT": "shared"}, "jobs", "jobs/train.py", ["python", "train.py"])
    assert "no step-count knob" in " ".join(result.warnings) and "launcher stops each trial" in " ".join(result.warnings)
    assert (w.warmup_steps, w.measured_steps, w.args) == (3, 10, {})
    assert run_baseline(repo, result.contract).returncode == 0


def test_launchers_resolve_to_our_interpreter():
    assert resolve_launcher(["accelerate", "launch", "--num_processes", "1"], "PY") == [
        "PY", "-m", "accelerate.commands.launch", "--num_processes", "1"]
    assert resolve_launcher(["python3.11", "-u"], "PY") == ["PY", "-u"]
    assert resolve_launcher(["/opt/venv/bin/python"], "PY") == ["/opt/venv/bin/python"]


@pytest.mark.skipif(importlib.util.find_spec("accelerate") is None, reason="accelerate is not installed")
def test_accelerate_launch_command(tmp_path):
    repo = write(tmp_path / "acc", {"train.py": ARGPARSE_TRAIN.replace('default="cuda"', 'default="cpu"')})
    result = init(repo, command=["accelerate", "launch", "--num_processes", "1", "train.py", "--lr", "0.5"],
                  budget_bytes=2**30)
    assert result.ok, result.message
    assert (result.contract.workload.launcher, result.contract.knob("lr").default) == ("accelerate", 0.5)


# ---------------------------------------------------------------- where the loop is


def test_a_function_called_from_module_level_is_the_entry(tmp_path):
    repo = write(tmp_path / "flat", {
        "lib.py": "def helper():\n    return 1\n",
        "run.py": "import argparse\nimport torch\n\np = argparse.ArgumentParser()\n"
                  "p.add_argument('--epochs', type=int, default=3)\nargs = p.parse_args()\n\n\n"
                  "def train(model):\n    loss = model.sum()\n    loss.backward()\n\n\n"
                  "def fit():\n    for _ in range(args.epochs):\n        train(torch.ones(2, requires_grad=True))\n\n\n"
                  "fit()\n",
    })
    result = init(repo, budget_bytes=2**30)
    assert result.ok, result.message
    assert (result.entry, result.loop_kind) == ("run.py", "function_from_module")
    assert "fit() (run.py:14) → train() (run.py:9) calls loss.backward()" in result.loop_why
    assert "called from module level" in result.loop_why
    # No steps knob (it trains for --epochs): accepted; the launcher stops the job.
    assert result.contract.workload.args == {} and result.contract.knob("epochs").role == "unknown"


def test_main_behind_the_guard_reaching_an_imported_loop(tmp_path):
    repo = write(tmp_path / "guarded", {
        "engine.py": "def step(model, batch):\n    loss = model(batch)\n    loss.backward()\n",
        "main.py": "from engine import step\n\n\ndef main():\n    step(None, None)\n\n\n"
                   "if __name__ == '__main__':\n    main()\n",
    })
    result = init(repo, command=["python", "main.py"], budget_bytes=2**30)
    assert result.ok, result.message
    assert result.loop_kind == "main_guard"
    assert result.loop_why == ("behind the __main__ guard: main() (main.py:4) → step() (engine.py:1) "
                               "calls loss.backward()")
    assert "the command runs it" in result.entry_why


def test_a_loop_reached_through_a_runner_and_a_module_attribute(tmp_path):
    """absl's ``app.run(main)`` calls main, which calls the loop through the imported module."""
    repo = write(tmp_path / "absl", {
        "train.py": "def train_and_evaluate(config):\n    loss = config.model()\n    loss.backward()\n",
        "main.py": "from absl import app\nimport train\n\n\ndef main(argv):\n    train.train_and_evaluate(None)\n\n\n"
                   "if __name__ == '__main__':\n    app.run(main)\n",
    })
    result = init(repo, command=["python", "main.py"], budget_bytes=2**30)
    assert result.ok, result.message
    assert result.loop_kind == "main_guard"
    assert result.loop_why == ("behind the __main__ guard: main() (main.py:5) → train_and_evaluate() (train.py:1) "
                               "calls loss.backward()")


@pytest.mark.parametrize("script, call", [
    ("from transformers import Trainer, TrainingArguments\n\n\ndef main():\n"
     "    trainer = Trainer(model=None, args=TrainingArguments('out'))\n    trainer.train()\n\n\n"
     "if __name__ == '__main__':\n    main()\n", "trainer.train() (a Hugging Face Trainer)"),
    ("import lightning as L\nimport torch\n\n\nclass Net(L.LightningModule):\n    pass\n\n\n"
     "trainer = L.Trainer(max_epochs=1)\ntrainer.fit(Net())\n", "trainer.fit() (a Lightning Trainer) at module level"),
])
def test_a_trainer_call_is_the_loop(tmp_path, script, call):
    repo = write(tmp_path / "trainer", {"finetune.py": script, "util.py": "X = 1\n"})
    result = init(repo, budget_bytes=2**30)
    assert result.ok, result.message
    assert (result.entry, result.loop_kind) == ("finetune.py", "trainer")
    assert call in result.loop_why


# ---------------------------------------------------------------- a device this machine lacks


@NO_CUDA
def test_a_cuda_default_flag_runs_the_baseline_on_cpu(tmp_path, capsys):
    repo = write(tmp_path / "dev", {"train.py": ARGPARSE_TRAIN})
    assert cli_main(["init", str(repo), "--budget-gib", "1", "--", "python", "train.py", "--lr", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "knob device defaults to 'cuda' (train.py:10) but this machine" in " ".join(out.split())
    c = load_contract(repo)
    assert (c.workload.overrides, c.knob("device").default, c.memory.device) == ({"device": "cpu"}, "cpu", "cpu")
    assert "the baseline runs with device=cpu (on the command line)" in c.workload.notes[0]
    done = run_baseline(repo, c)
    assert done.returncode == 0, done.stderr
    assert "ran on cpu" in done.stdout


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_default_stays_on_a_machine_with_cuda(tmp_path):
    repo = write(tmp_path / "gpu", {"train.py": ARGPARSE_TRAIN})
    result = init(repo, command=["python", "train.py"], budget_bytes=2**30)
    assert result.ok, result.message
    c = result.contract
    assert (c.workload.overrides, c.workload.notes, c.knob("device").default, c.memory.device) == ({}, [], "cuda", "cuda")
    done = run_baseline(repo, c)
    assert done.returncode == 0 and "ran on cuda" in done.stdout, done.stderr


@NO_CUDA
def test_the_commands_own_cuda_device_is_replaced(tmp_path):
    repo = write(tmp_path / "dev", {"train.py": ARGPARSE_TRAIN.replace('default="cuda"', 'default="cpu"')})
    result = init(repo, command=["python", "train.py", "--device", "cuda", "--lr", "0.5"], budget_bytes=2**30)
    assert result.ok, result.message
    assert result.notes[0].startswith("the command sets knob device to 'cuda' but this machine")
    argv = build_argv(result.contract, trial_knob_values(result.contract, {}, 13), python="PY")
    assert argv == ["PY", "train.py", "--device=cpu", "--lr", "0.5", "--max_iters=13"]
    from infrarsi.report.model import reproduce_command
    from infrarsi.runner.command import job_steps
    from infrarsi.trials import Candidate

    # As every trial ran it: told the job's own length (InfraRSI stops it after the steps it measures).
    assert reproduce_command(Candidate(), result.contract) == (
        f"python train.py --device=cpu --lr 0.5 --max_iters={job_steps(result.contract)}")


@NO_CUDA
def test_globals_and_source_defaults_and_switches_move_to_cpu(tmp_path):
    repo = write(tmp_path / "g", {"train.py": GLOBALS_TRAIN.replace("device = 'cpu'", "device = 'cuda'"),
                                  "configurator.py": CONFIGURATOR})
    result = init(repo, command=["python", "train.py"], budget_bytes=2**30)
    assert result.ok, result.message
    assert result.contract.workload.overrides == {"device": "cpu"}
    done = run_baseline(repo, result.contract)
    assert done.returncode == 0 and "ran 16 4 cpu True 13" in done.stdout, done.stderr

    plain = write(tmp_path / "plain", {"train.py": "import torch\ndevice = 'cuda'\n"
                                                   "x = torch.ones(1, device=device, requires_grad=True)\n"
                                                   "x.sum().backward()\n"})
    result = init(plain, command=["python", "train.py"], budget_bytes=2**30)
    assert result.ok, result.message
    c = result.contract
    assert c.knob("device").flag == "" and "written into train.py" in c.workload.notes[0]
    assert source_knobs(c, trial_knob_values(c, {}, 13)) == {"train.py": {"device": "cpu"}}

    switch = write(tmp_path / "sw", {"train.py": "import argparse\np = argparse.ArgumentParser()\n"
                                                 "p.add_argument('--cuda', action=argparse.BooleanOptionalAction, default=True)\n"
                                                 "a = p.parse_args()\nif a.cuda:\n    import torch; torch.ones(1).cuda()\n"})
    result = init(switch, command=["python", "train.py"], budget_bytes=2**30)
    assert result.ok, result.message
    assert build_argv(result.contract, trial_knob_values(result.contract, {}, 13), python="PY") == [
        "PY", "train.py", "--no-cuda"]


@NO_CUDA
def test_a_script_that_needs_cuda_with_no_knob_is_one_line(tmp_path, capsys):
    repo = write(tmp_path / "hard", {"train.py": "import torch\n\n\ndef main():\n"
                                                 "    assert torch.cuda.is_available(), 'needs a GPU'\n"
                                                 "    torch.ones(1).backward()\n\n\nif __name__ == '__main__':\n    main()\n"})
    before = snapshot(repo)
    assert cli_main(["init", str(repo), "--", "python", "train.py"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "train.py:5 needs CUDA (assert torch.cuda.is_available()" in err and "no CUDA device" in err
    assert snapshot(repo) == before
    # Guarded the same check is fine: it only runs when asked for.
    write(repo, {"train.py": "import sys\nimport torch\nif '--ddp' in sys.argv:\n    assert torch.cuda.is_available()\n"
                             "torch.ones(1, requires_grad=True).sum().backward()\n"})
    assert init(repo, command=["python", "train.py"], budget_bytes=2**30).ok


# ---------------------------------------------------------------- bad input: one line, exit 2


@pytest.mark.parametrize("files, command, message", [
    ({}, ["python", "nosuch.py"], "`python nosuch.py` does not start: nosuch.py does not exist in"),
    ({}, ["python", "-m", "no.such"], "`python -m no.such` does not start: no module no.such in"),
    ({"notes.txt": "this is : not python\n"}, ["python", "notes.txt"], "notes.txt is not a Python file"),
    ({"data.py": b"\xff\xfe\x00binary"}, ["python", "data.py"], "data.py is not a Python file (it is not UTF-8 text)"),
    ({"config/bad.py": "batch_size = (\n"}, ["python", "train.py", "config/bad.py"],
     "config file config/bad.py is not Python: SyntaxError line 1"),
    ({"c.yaml": "a: [1, 2\nb: 3\n"}, ["python", "train.py", "--config", "c.yaml"], "config file c.yaml is not valid YAML"),
    ({"c.json": "{'a': 1}"}, ["python", "train.py", "--config=c.json"], "config file c.json is not valid JSON"),
    ({}, ["python", "train.py", "config/missing.py"], "config file config/missing.py (from the command) does not exist"),
    ({}, [], "nothing after --"),
    ({}, ["bash", "run.sh"], "the command starts with 'bash'"),
    ({}, ["python", "train.py", "--max_iters", "ten"], "the command sets --max_iters to 'ten', which is not an int"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, files, command, message):
    repo = tmp_path / "repo"
    write(repo, {"train.py": GLOBALS_TRAIN if any("config/" in c for c in command) else ARGPARSE_TRAIN,
                 "configurator.py": CONFIGURATOR})
    for rel, data in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data if isinstance(data, bytes) else data.encode())
    before = snapshot(repo)
    assert cli_main(["init", str(repo), "--", *command]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert message in err
    assert err.startswith("error: ") and err.count("error: ") == 1
    assert not contract_path(repo).exists() and snapshot(repo) == before
    result = init(repo, command=command)
    assert result.status == "error" and message in " ".join(result.message.split())


def test_the_cli_takes_the_command_after_double_dash_in_a_subprocess(tmp_path):
    repo = write(tmp_path / "sub", {"train.py": ARGPARSE_TRAIN.replace('default="cuda"', 'default="cpu"')})
    done = subprocess.run([*INFRARSI, "init", ".", "--budget-gib", "1", "--json", "--",
                           "python", "train.py", "--batch_size=4"], cwd=repo, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["contract"]["workload"]["command"] == ["python", "train.py", "--batch_size=4"]
    assert data["loop_kind"] == "main_guard" and data["entry_why"].startswith("the command runs it")
    done = subprocess.run([*INFRARSI, "init", ".", "--", "python", "gone.py"],
                          cwd=repo, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "gone.py does not exist" in done.stderr
    assert "Traceback" not in done.stderr


def test_optimize_takes_the_command_and_stops_on_bad_input_with_exit_2(tmp_path, capsys):
    repo = write(tmp_path / "opt", {"train.py": ARGPARSE_TRAIN})
    before = snapshot(repo)
    assert cli_main(["optimize", str(repo), "faster", "--", "python", "missing.py", "--lr", "1"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "`python missing.py --lr 1` does not start: missing.py does not exist" in err
    assert snapshot(repo) == before
