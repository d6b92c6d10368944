"""Ctrl-C or SIGTERM of InfraRSI while a trial runs leaves no process of the trial behind."""

import signal
import subprocess
import sys
import time

import psutil
import pytest

from infrarsi.contract import save_contract

from .conftest import DATA, alive, tree_digest, trial_processes

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_kills_the_trial_tree(make_repo, tmp_path, sig):
    repo, contract = make_repo("hangs.py")
    save_contract(contract, repo)
    before = tree_digest(repo)
    log_dir = tmp_path / "logs"
    driver = subprocess.Popen([sys.executable, str(DATA / "driver.py"), str(repo), str(log_dir)],
                              stdout=subprocess.PIPE, text=True)
    try:
        # The hanging script reports one step and then its helper is certainly running.
        for line in driver.stdout:
            if line.startswith("report"):
                break
        trial_tree = psutil.Process(driver.pid).children(recursive=True)
        log = (log_dir / "output.log").read_text()
        helpers = trial_processes(log)
        assert len(helpers) >= 2 and len(trial_tree) >= 2
        driver.send_signal(sig)
        assert driver.wait(timeout=20) == 130
        assert "interrupted" in driver.stdout.read()
    finally:
        driver.kill()
        driver.wait()
    time.sleep(0.1)
    assert [p.pid for p in trial_tree if alive(p.pid)] == []
    assert not trial_processes(log)
    assert tree_digest(repo) == before
