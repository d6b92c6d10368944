"""A worker killed outright (SIGKILL: no handler runs) must not leave its trial's processes running.

The runner starts the trial in a session of its own, so nothing reaches it by process group; the
kernel's parent-death signal does (SIGKILL for a plain script, SIGTERM for torchrun, whose agent
then shuts its worker group down).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

from .conftest import wait_for

DRIVER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from infrarsi.runner.process import TrialProcess
    argv = sys.argv[1:]
    proc = TrialProcess(argv, cwd=Path.cwd(), env=dict(__import__("os").environ), log_path=Path("trial.log"))
    print(proc.pid, flush=True)
    time.sleep(600)
""")

SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(600)\n"


def _tree_after_kill(tmp_path, argv: list[str], expect: int, up: int) -> tuple[list[psutil.Process], list[psutil.Process]]:
    """Start a driver that launches ``argv`` as a trial, wait for ``expect`` descendants and ``up``
    workers that said so, SIGKILL the driver; return (descendants, those still alive 20 s later).

    Waiting for the workers' own word, not only their count, keeps the kill out of the moment
    torchrun is still forking them (a process counted there may not be its worker yet)."""
    log = tmp_path / "trial.log"
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, *argv], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    tree: list[psutil.Process] = []
    try:
        root = psutil.Process(driver.pid)

        def grown():
            nonlocal tree
            tree = [p for p in root.children(recursive=True) if p not in tree] + tree
            return len(tree) >= expect

        def ready():
            return log.exists() and log.read_text().count("up") >= up and grown()

        wait_for(ready, 120, f"{expect} processes under the driver, {up} of them up")
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(10)
        _gone, alive = psutil.wait_procs(tree, timeout=20)
        return tree, alive
    finally:
        if driver.poll() is None:
            driver.kill()
        for proc in tree:  # a failing test leaves no orphans behind
            with contextlib.suppress(psutil.Error):
                proc.kill()


def test_plain_trial_dies_with_its_worker(tmp_path):
    (tmp_path / "train.py").write_text(SLEEPER)
    tree, alive = _tree_after_kill(tmp_path, [sys.executable, "train.py"], expect=1, up=1)
    assert tree and not alive, f"left running after the worker died: {[p.pid for p in alive]}"


@pytest.mark.e2e
def test_torchrun_group_dies_with_its_worker(tmp_path):
    (tmp_path / "train.py").write_text(SLEEPER)
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "train.py"]
    # torchrun itself and its two workers (in sessions of their own)
    tree, alive = _tree_after_kill(tmp_path, argv, expect=3, up=2)
    assert len(tree) >= 3
    assert not alive, f"torchrun group left running after the worker died: {[(p.pid, p.cmdline()) for p in alive]}"
