"""What a trial's code can reach: one test per way out found in issue 19, each a real trial of a
real script (tests/test_data/runner/adversary.py, daemon.py) in the real sandbox."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest

from infrarsi.contract import Knob, save_contract
from infrarsi.runner import sandbox
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus

from .conftest import DATA, alive, knobs, make_contract, tree_digest, trial_processes

pytestmark = pytest.mark.e2e

SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-secret-1",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-2",
    "PGPASSWORD": "pg-secret-3",
    "GITHUB_TOKEN": "ghp-secret-4",
    "INFRARSI_TEST_PG_URL": "postgresql://infrarsi:pg-secret-5@127.0.0.1:5432/db",
    "TORCH_HUB_TOKEN": "hub-secret-6",
}
MODES = [pytest.param(True, id="sandbox"), pytest.param(False, id="no-sandbox")]


def with_str_knob(repo, name):
    return make_contract(repo, knob_list=[*knobs(), Knob(name=name, role="unknown", type="str", default="",
                                                         flag=f"--{name}")])


def adversary(make_repo):
    repo, _ = make_repo("adversary.py")
    return repo, with_str_knob(repo, "targets")


@pytest.mark.parametrize("sandboxed", MODES)
def test_a_trial_that_prints_its_environment_finds_no_secret(make_repo, monkeypatch, sandboxed):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    repo, contract = adversary(make_repo)
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(), sandbox=sandboxed))
    assert result.status is TrialStatus.OK, result.detail
    log = open(result.log_path).read()
    env = json.loads(re.search(r"^ENV (.*)$", log, re.M)[1])
    leaked = sorted(name for name, value in SECRETS.items() if value in log)
    assert not leaked, f"secrets reached the trial: {leaked}"
    assert env["OMP_NUM_THREADS"] == "1" and env["PATH"] == os.environ["PATH"]
    assert env["HOME"] != os.path.expanduser("~") and "INFRARSI_RECORDS" in env


def test_a_trial_cannot_write_to_the_repo_its_home_or_git_hooks(make_repo, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    repo, contract = adversary(make_repo)
    (repo / ".git" / "hooks").mkdir(parents=True)
    targets = [repo / "pwned.txt", repo / "train.py", repo / ".git" / "hooks" / "pre-commit", home / "pwned.txt"]
    before = {p: tree_digest(p) for p in (repo, home)}
    hooks_before = sorted(os.listdir(repo / ".git" / "hooks"))
    result = run_trial(TrialSpec(repo=repo, contract=contract,
                                 candidate=Candidate(knobs={"targets": ",".join(map(str, targets))})))
    assert result.status is TrialStatus.OK, result.detail
    log = open(result.log_path).read()
    for target in targets:
        assert f"write {target}: refused" in log, log
    assert {p: tree_digest(p) for p in (repo, home)} == before
    assert sorted(os.listdir(repo / ".git" / "hooks")) == hooks_before
    assert not (home / "pwned.txt").exists() and not (repo / "pwned.txt").exists()


def test_a_link_to_outside_the_repo_is_read_only_in_the_trial(make_repo, tmp_path):
    outside = tmp_path / "outside"
    (outside / "data").mkdir(parents=True)
    (outside / "data" / "train.bin").write_bytes(b"\1" * 64)
    repo, contract = adversary(make_repo)
    (repo / "shared").symlink_to(outside / "data")
    before = tree_digest(outside)
    target = repo / "shared" / "train.bin"
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(knobs={"targets": str(target)})))
    assert result.status is TrialStatus.OK, result.detail
    assert tree_digest(outside) == before


def daemons(marker):
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if marker in (proc.info["cmdline"] or []) and alive(proc.pid):
            found.append(proc)
    return found


@pytest.mark.parametrize("sandboxed,lifetime", [(True, "cgroup"), (False, "cgroup"), (False, "subreaper")])
def test_a_double_forked_daemon_is_gone_after_its_trial(make_repo, monkeypatch, sandboxed, lifetime):
    if lifetime == "subreaper":
        monkeypatch.setattr(sandbox, "_cgroup_root", lambda: None)
    elif sandbox._cgroup_root() is None:
        pytest.skip("no cgroup v2 hierarchy this process may make children in")
    repo, _ = make_repo("daemon.py")
    contract = with_str_knob(repo, "marker")
    marker = f"infrarsi-test-daemon-{uuid.uuid4().hex}"
    try:
        result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(knobs={"marker": marker}),
                                     sandbox=sandboxed))
        assert result.status is TrialStatus.OK, result.detail
        assert "daemon started" in open(result.log_path).read()
        time.sleep(0.2)
        assert daemons(marker) == [], "the daemon outlived its trial"
    finally:
        for proc in daemons(marker):
            proc.kill()


def test_a_killed_infrarsi_leaves_no_process_and_its_workspace_goes_at_the_next_start(make_repo, tmp_path):
    repo, contract = make_repo("hangs.py")
    save_contract(contract, repo)
    log_dir = tmp_path / "logs"
    driver = subprocess.Popen([sys.executable, str(DATA / "driver.py"), str(repo), str(log_dir)],
                              stdout=subprocess.PIPE, text=True)
    try:
        for line in driver.stdout:
            if line.startswith("report"):
                break
        log = (log_dir / "output.log").read_text()
        assert trial_processes(log)
        workspaces = [p for p in Path(tempfile.gettempdir()).glob(f"{sandbox.WORKSPACE_PREFIX}*")
                      if (p / sandbox.OWNER_FILE).is_file()
                      and (p / sandbox.OWNER_FILE).read_text().split()[0] == str(driver.pid)]
        assert len(workspaces) == 1
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
    finally:
        driver.kill()
        driver.wait()
    deadline = time.monotonic() + 10
    while trial_processes(log) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not trial_processes(log), "the trial outlived the InfraRSI that started it"
    assert workspaces[0].exists()
    removed = sandbox.remove_stale()
    assert workspaces[0] in removed and not workspaces[0].exists()


def test_stale_cleanup_spares_live_owners_and_unmarked_folders(tmp_path):
    mine, dead, unmarked = (tmp_path / f"{sandbox.WORKSPACE_PREFIX}{n}" for n in ("mine", "dead", "unmarked"))
    for folder in (mine, dead, unmarked):
        folder.mkdir()
    sandbox.claim_workspace(mine)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    stamp = f"{gone.pid} {psutil.Process(gone.pid).create_time():.3f}"
    gone.wait()
    (dead / sandbox.OWNER_FILE).write_text(stamp)
    # Cgroups a dead InfraRSI elsewhere on this machine left are removed too: only the folders here count.
    removed = sandbox.remove_stale(tmp_path)
    assert [path for path in removed if tmp_path in path.parents] == [dead]
    assert mine.exists() and unmarked.exists() and not dead.exists()


def test_without_bwrap_trials_refuse_and_say_what_to_do(make_repo, monkeypatch, capsys):
    from infrarsi.cli import main

    monkeypatch.setenv("PATH", "/nonexistent")
    sandbox.bwrap_path.cache_clear()
    sandbox.bwrap_problem.cache_clear()
    try:
        repo, contract = make_repo("good.py")
        save_contract(contract, repo)
        assert main(["trial", str(repo)]) == 2
        message = capsys.readouterr().err
        assert "bubblewrap" in message and "--no-sandbox" in message
        assert main(["trial", str(repo), "--no-sandbox", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["status"] == "ok"
    finally:
        sandbox.bwrap_path.cache_clear()
        sandbox.bwrap_problem.cache_clear()


def test_only_a_virtual_environment_of_the_repo_is_mounted(tmp_path):
    """A venv kept in the repo (repo/.venv) holds the interpreter: mounted read-only; no other part
    of the repo, nor a folder holding it (a sys.path entry like the repo's parent), is."""
    repo = tmp_path / "repo"
    (repo / ".venv" / "lib").mkdir(parents=True)
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (repo / "src").mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    mounts = sandbox.Mounts(workspace=workspace, cwd=workspace, repo=repo,
                            read_only=[repo / ".venv" / "lib", repo / "src", repo, tmp_path])
    argv = sandbox.wrap(["python", "train.py"], mounts)
    sources = [argv[i + 1] for i, arg in enumerate(argv) if arg in ("--ro-bind", "--bind", "--dev-bind")]
    assert str(repo / ".venv" / "lib") in sources
    assert not [s for s in sources if s in (str(repo), str(repo / "src"), str(tmp_path))]
    assert argv[argv.index("--chdir") + 1] == str(workspace) and argv[-2:] == ["python", "train.py"]
    assert "--unshare-net" in argv and "--die-with-parent" in argv and "--unshare-pid" in argv


@pytest.mark.parametrize("network", [False, True], ids=["no-network", "network-declared"])
def test_the_network_is_there_only_when_the_contract_says_the_job_needs_it(make_repo, network):
    from infrarsi.contract import SandboxPolicy

    repo, _ = make_repo("connects.py")
    contract = with_str_knob(repo, "address")
    contract.sandbox = SandboxPolicy(network=network)
    with socket.create_server(("127.0.0.1", 0)) as server:
        address = f"127.0.0.1:{server.getsockname()[1]}"
        result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(knobs={"address": address})))
    assert result.status is TrialStatus.OK, result.detail
    assert ("connect: reached" if network else "connect: refused") in open(result.log_path).read()
