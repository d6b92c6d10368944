"""The trial's process tree (infrarsi/runner/process.py): killing it waits for death, not reaping."""

import subprocess
import time

import psutil

from infrarsi.runner.process import TrialProcess, _await_death


def _zombie_child(parent: psutil.Process) -> psutil.Process:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        zombies = [c for c in parent.children() if c.status() == psutil.STATUS_ZOMBIE]
        if zombies:
            return zombies[0]
        time.sleep(0.01)
    raise AssertionError("the child never exited")


def test_a_zombie_its_parent_does_not_reap_counts_as_dead():
    # `sleep 30` is exec'd over the shell that started `true`, so nothing reaps `true`: the state of
    # an orphan waiting for a slow PID 1 in a container.
    holder = subprocess.Popen(["sh", "-c", "true & exec sleep 30"])
    try:
        zombie = _zombie_child(psutil.Process(holder.pid))
        began = time.monotonic()
        _await_death([zombie], timeout=5)
        assert time.monotonic() - began < 1.0
        assert zombie.status() == psutil.STATUS_ZOMBIE  # still unreaped: not waited for
    finally:
        holder.kill()
        holder.wait()


def test_kill_ends_every_member_of_the_tree(tmp_path):
    process = TrialProcess(["sh", "-c", "sleep 30 & sleep 30 & wait"], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
                           log_path=tmp_path / "log")
    deadline = time.monotonic() + 10
    while len(process.members(refresh=True)) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    members = process.members(refresh=False)
    assert len(members) == 3
    process.kill()
    for member in members:
        assert not member.is_running() or member.status() == psutil.STATUS_ZOMBIE
    assert process.returncode is not None
