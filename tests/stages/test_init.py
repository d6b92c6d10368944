"""init end to end on small repos (real files, real git) and on the project's fixtures."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import git
import pytest

from infrarsi.cli import init as init_cli
from infrarsi.contract import ContractError, contract_path, load_contract, require_intact
from infrarsi.stages.init import init

ROOT = Path(__file__).parents[2]
DATA = ROOT / "tests" / "test_data" / "init"


def copy(name: str, tmp_path: Path, *, commit: bool = False) -> Path:
    repo = tmp_path / name
    shutil.copytree(DATA / name, repo)
    if commit:
        files = [p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file()]
        g = git.Repo.init(repo)
        g.index.add(files)
        g.index.commit("user's job", author=git.Actor("u", "u@example.com"), committer=git.Actor("u", "u@example.com"))
    return repo


def roles(result) -> dict[str, str]:
    return {k.name: k.role for k in result.contract.knobs}


def test_argparse_repo(tmp_path):
    repo = copy("argparse_repo", tmp_path, commit=True)
    before = (repo / "train.py").read_bytes()
    result = init(repo)
    assert result.ok, result.message
    contract = load_contract(repo)
    assert contract == result.contract
    assert contract.base_commit == git.Repo(repo).head.commit.hexsha
    assert roles(result) == {
        "batch_size": "workload", "micro_batch_size": "micro_batch", "block_size": "workload",
        "n_layer": "workload", "n_embd": "workload", "vocab_size": "workload", "lr": "workload",
        "seed": "workload", "max_iters": "steps", "threads": "threads", "compile": "compile",
        "fused": "optimizer_impl", "dtype": "dtype", "optimizer_impl": "optimizer_impl",
        "num_workers": "dataloader_workers", "out_dir": "unknown",
    }
    w = contract.workload
    assert (w.command, w.launcher, w.knob_style) == (["python", "train.py"], "python", "argparse")
    assert (w.global_batch, w.seq_len, w.tokens_per_step) == (16, 64, 1024)
    assert (w.global_batch_knob, w.seq_len_knob, w.seed) == ("batch_size", "block_size", 1337)
    assert (w.hidden, w.heads) == (128, 0)  # n_embd; no heads knob
    assert (w.warmup_steps, w.measured_steps, w.planned_steps, w.args) == (3, 10, 200, {"max_iters": 13})
    assert contract.loss.compare_steps == 13
    assert contract.memory.budget_bytes == 1536 * 2**20  # the README's budget line
    assert contract.knob("micro_batch_size").domain == [1, 2, 4, 8, 16]
    assert contract.knob("fused").render(False) == ["--no-fused"]
    assert result.unknown == ["out_dir"]
    assert result.skipped == [{"name": "resume", "source": "train.py:28", "reason": "default is None"}]
    assert (contract.scope.editable, result.locked) == (["train.py", "model.py"], ["data.py"])
    # The probe is offered as a diff; the user's file is untouched.
    assert result.probe_missing and "+        probe.step(loss=probe_loss, tokens=probe_tokens)" in result.probe_diff
    assert (repo / "train.py").read_bytes() == before


def test_insert_probe_writes_only_when_asked(tmp_path):
    repo = copy("argparse_repo", tmp_path)
    result = init(repo, insert_probe=True)
    assert result.ok and result.probe_inserted and not result.probe_missing
    assert "probe.step(loss=probe_loss, tokens=probe_tokens)" in (repo / "train.py").read_text()
    again = init(repo)
    assert not again.probe_missing and again.probe_diff is None


def test_globals_repo(tmp_path):
    repo = copy("globals_repo", tmp_path)
    result = init(repo, budget_bytes=3 * 2**30)
    assert result.ok, result.message
    c = result.contract
    assert roles(result)["batch_size"] == "micro_batch"  # nanoGPT: accumulation is its own knob
    assert roles(result)["gradient_accumulation_steps"] == "grad_accum"
    for name in ("n_expert", "top_k", "aux_loss_coef", "block_size", "learning_rate", "seed", "dataset"):
        assert roles(result)[name] == "workload", name
    assert (c.workload.global_batch, c.workload.tokens_per_step, c.workload.global_batch_knob) == (32, 4096, "")
    assert c.knob("batch_size").domain == [1, 2, 4, 8, 16, 32]
    assert c.knob("gradient_accumulation_steps").domain == [1, 2, 4, 8, 16, 32]
    assert c.knob("compile").render(True) == ["--compile=True"]  # the configurator's literal_eval
    assert c.workload.args == {"max_iters": 13} and c.workload.planned_steps == 600000
    assert c.memory.budget_bytes == 3 * 2**30
    assert "configurator.py" in c.scope.locked and not result.probe_missing
    assert result.skipped == [{"name": "dtype", "source": "train.py:32", "reason": "default is computed at run time"}]


def test_dataclass_repo(tmp_path):
    repo = copy("dataclass_repo", tmp_path)
    result = init(repo, budget_bytes=2**30)
    assert result.ok, result.message
    c = result.contract
    assert c.workload.knob_style == "dataclass"
    assert all(k.flag == "" for k in c.knobs)
    assert c.workload.args == {}  # the step knob has no flag: the runner writes it into config.py
    assert (c.workload.global_batch, c.workload.seq_len, c.workload.planned_steps) == (32, 128, 500)
    assert roles(result)["num_steps"] == "steps" and c.knob("num_steps").source == "config.py:12"
    assert c.knob("activation_checkpointing").tunable


def test_torchrun_repo(tmp_path):
    repo = copy("torchrun_repo", tmp_path)
    result = init(repo, budget_bytes=2**30)
    assert result.ok, result.message
    c = result.contract
    assert c.workload.command == ["torchrun", "--nproc_per_node=1", "train.py"]
    nproc = c.knob("nproc_per_node")
    assert (nproc.role, nproc.default, nproc.flag) == ("nproc_per_node", 1, "--nproc_per_node")
    assert roles(result)["bucket_cap_mb"] == "ddp_bucket_mb"
    assert c.knob("bucket_cap_mb").domain == [10, 25, 50, 100]
    assert 'os.environ.get("WORLD_SIZE", "1")' in result.probe_diff


def test_scope_can_be_replaced_widened_and_narrowed(tmp_path):
    repo = copy("argparse_repo", tmp_path)
    result = init(repo, scope=["+data.py", "-model.py"], budget_bytes=2**30)
    assert result.editable == ["train.py", "data.py"] and result.locked == ["model.py"]
    result = init(repo, scope=["model.py::TinyLM.forward"], budget_bytes=2**30)
    assert result.editable == ["model.py"] and result.contract.scope.functions == ["model.py::TinyLM.forward"]
    bad = init(repo, scope=["model.py::nope"])
    assert bad.status == "error" and "model.py defines no function or class nope" in bad.message
    bad = init(repo, scope=["missing.py"])
    assert bad.status == "error" and "no Python file missing.py" in bad.message


@pytest.mark.parametrize(
    "name, message",
    [
        ("syntax_error", "SyntaxError in train.py line 6: '(' was never closed"),
        ("no_entry", "no entry point found"),
        ("does_not_exist", "is not a directory"),
    ],
)
def test_errors_are_values_and_exit_2(tmp_path, capsys, name, message):
    repo = DATA / name
    result = init(repo)
    assert result.status == "error" and message in result.message
    assert not contract_path(repo).exists()
    assert _cli(["init", str(repo), "--json"]) == 2
    assert message in json.loads(capsys.readouterr().out)["message"]


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="infrarsi")
    init_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_renders_the_knob_table(tmp_path, capsys):
    repo = copy("argparse_repo", tmp_path)
    assert _cli(["init", str(repo), "--budget-gib", "1"]) == 0
    out = capsys.readouterr().out
    assert "micro_batch" in out and "1, 2, 4, 8, 16" in out and "--insert-probe" in out
    assert load_contract(repo).memory.budget_bytes == 2**30


def test_a_locked_file_edited_after_init_is_refused(tmp_path):
    repo = copy("argparse_repo", tmp_path, commit=True)
    assert init(repo).ok
    assert require_intact(repo).workload.entry == "train.py"
    (repo / "model.py").write_text((repo / "model.py").read_text() + "\n# an editable file may change\n")
    require_intact(repo)
    with (repo / "data.py").open("a") as f:
        f.write("\nSHUFFLE = False\n")
    with pytest.raises(ContractError, match=r"locked file data.py is changed since init.*git checkout -- data.py"):
        require_intact(repo)
    (repo / "data.py").unlink()
    with pytest.raises(ContractError, match="locked file data.py is missing"):
        require_intact(repo)


def test_a_bad_field_in_the_written_contract_is_named(tmp_path):
    repo = copy("argparse_repo", tmp_path)
    assert init(repo, budget_bytes=2**30).ok
    path = contract_path(repo)
    path.write_text(path.read_text().replace("global_batch = 16", "global_batch = -16"))
    with pytest.raises(ContractError, match="workload.global_batch"):
        load_contract(repo)


def test_init_again_keeps_the_owners_tables_and_says_when_it_cannot(tmp_path):
    repo = copy("argparse_repo", tmp_path)
    assert init(repo, budget_bytes=2**30).ok
    path = contract_path(repo)
    path.write_text(path.read_text() + "\n[sandbox]\nread_only = [\"/data\"]\n\n[verify]\nmost_rounds = 4\n")
    again = init(repo, budget_bytes=2**29)
    assert again.ok and not any("not kept" in w for w in again.warnings)
    kept = load_contract(repo)
    assert kept.sandbox_policy.read_only == ["/data"] and kept.verify_policy.most_rounds == 4
    assert kept.memory.budget_bytes == 2**29
    path.write_text(path.read_text().replace("most_rounds = 4", "most_rounds = 1"))
    third = init(repo)
    assert third.ok and any("verify.least_rounds" in w and "not kept" in w for w in third.warnings), third.warnings
    assert load_contract(repo).verify is None


# --- the project's fixtures ------------------------------------------------------------------

COMMON = {
    "batch_size": "workload", "micro_batch_size": "micro_batch", "block_size": "workload",
    "n_layer": "workload", "n_head": "workload", "n_embd": "workload", "vocab_size": "workload",
    "learning_rate": "workload", "seed": "workload", "max_iters": "steps", "threads": "threads",
    "activation_checkpointing": "activation_checkpointing", "compile": "compile", "dtype": "dtype",
    "optimizer_impl": "optimizer_impl", "device": "workload",
}
FIXTURES = {
    "dense_gpt": ("argparse", "python", COMMON),
    "moe_gpt": ("globals", "python", {**COMMON, "n_expert": "workload", "top_k": "workload",
                                      "aux_loss_coef": "workload"}),
    "ddp_gpt": ("argparse", "torchrun", {**COMMON, "bucket_cap_mb": "ddp_bucket_mb",
                                         "gradient_as_bucket_view": "ddp_grad_as_bucket_view",
                                         "static_graph": "ddp_static_graph", "fsdp": "fsdp",
                                         "nproc_per_node": "nproc_per_node"}),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture(tmp_path, name):
    source = ROOT / "fixtures" / name
    if not (source / "train.py").exists():
        pytest.skip(f"fixtures/{name} is not written yet")
    repo = tmp_path / name
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns(".infrarsi", "__pycache__"))
    result = init(repo)
    assert result.ok, result.message
    style, launcher, expected = FIXTURES[name]
    c = result.contract
    assert (c.workload.knob_style, c.workload.launcher) == (style, launcher)
    found = roles(result)
    missing = sorted(set(expected) - set(found))
    assert not missing, f"knobs not found: {missing}"
    wrong = {n: (found[n], r) for n, r in expected.items() if found[n] != r}
    assert not wrong, f"(found, expected) roles: {wrong}"
    assert c.workload.tokens_per_step == c.workload.global_batch * c.workload.seq_len > 0
    # The model's shape from its knobs, as the command runs it: selective recomputation's prior reads it.
    assert (c.workload.hidden, c.workload.heads, c.workload.layers) == (
        c.knob("n_embd").default, c.knob("n_head").default, c.knob("n_layer").default)
    for role in ("micro_batch", "activation_checkpointing", "compile", "dtype", "optimizer_impl", "threads"):
        assert all(k.tunable for k in c.by_role(role)), role
    readme = source / "README.md"
    if readme.exists() and "budget_mib=" in readme.read_text():
        mib = int(readme.read_text().split("budget_mib=")[1].split()[0].rstrip("->"))
        assert c.memory.budget_bytes == mib * 2**20
