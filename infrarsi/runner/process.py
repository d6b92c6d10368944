"""The trial's process tree: started in its own session, killed whole, never left behind.

torchrun starts each worker in a session of its own, so killing the trial's process group is not
enough: the tree is walked with psutil, frozen with SIGSTOP (so nothing forks while it is being
killed), walked again, and every member gets SIGKILL.

When InfraRSI itself dies without a chance to kill the tree (SIGKILL, OOM killer, a node losing a
worker of a shared study), the launched process gets a signal from the kernel (Linux
``PR_SET_PDEATHSIG``): SIGKILL for a plain script, SIGTERM for torchrun, whose agent answers it by
shutting its whole worker group down (a SIGKILLed agent would leave its workers running).

What the walk cannot see (a daemon that double-forked away from the tree) is caught by the trial's
:class:`~infrarsi.runner.sandbox.Containment`: its cgroup, or InfraRSI as the orphans' subreaper.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Container, Iterator
from pathlib import Path
from types import FrameType
from typing import NoReturn

import psutil

from infrarsi.runner.sandbox import TOKEN_ENV, Containment

_PR_SET_PDEATHSIG = 1
try:
    # Resolved here, not in the forked child: between fork and exec only async-signal-safe work.
    _prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):
    _prctl = None


def _is_torchrun(argv: list[str]) -> bool:
    return any(Path(a).name == "torchrun" or a == "torch.distributed.run" for a in argv[:3])


def _die_with_parent(sig: signal.Signals, parent: int, containment: Containment) -> Callable[[], None]:
    """A ``preexec_fn`` that puts the child in its containment and makes it get ``sig`` when the
    launching thread's process dies."""

    def preexec() -> None:
        containment.preexec()
        if _prctl is None:
            return
        _prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl took effect
            os.kill(os.getpid(), sig)

    return preexec


@contextlib.contextmanager
def _released_on_error(containment: Containment) -> Iterator[None]:
    try:
        yield
    except BaseException:
        containment.kill()
        raise


class TrialProcess:
    """One launched command, its output going to ``log_path``."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str], log_path: Path):
        self.containment = Containment()
        self.started = time.perf_counter()
        with open(log_path, "wb") as log, _released_on_error(self.containment):
            self._popen = subprocess.Popen(
                argv,
                cwd=cwd,
                env={**env, TOKEN_ENV: self.containment.token},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent(signal.SIGTERM if _is_torchrun(argv) else signal.SIGKILL, os.getpid(),
                                             self.containment),
            )
        self.pid = self._popen.pid
        self.exited_at: float | None = None
        """time.monotonic() the moment the launched process exited (its exit, not the next poll)."""
        threading.Thread(target=self._await_exit, name=f"infrarsi-exit-{self.pid}", daemon=True).start()
        self._root = psutil.Process(self.pid)
        self._known: dict[int, psutil.Process] = {self.pid: self._root}
        # Reentrant: the interrupt handler may kill while the main thread is inside members().
        self._lock = threading.RLock()
        self._killed = False

    def _await_exit(self) -> None:
        self._popen.wait()
        self.exited_at = time.monotonic()

    def members(self, *, refresh: bool) -> list[psutil.Process]:
        """The tree's processes; ``refresh`` walks it again (2–4 ms), otherwise the last walk."""
        with self._lock:
            if refresh:
                self._discover()
            return list(self._known.values())

    def _discover(self) -> None:
        with contextlib.suppress(psutil.Error):
            for child in self._root.children(recursive=True):
                self._known.setdefault(child.pid, child)
        # A member found earlier keeps its psutil handle even once reparented: the handle checks
        # the creation time, so a recycled pid is never mistaken for it.
        for pid, proc in list(self._known.items()):
            if pid != self.pid and not proc.is_running():
                del self._known[pid]
            else:
                with contextlib.suppress(psutil.Error):
                    for child in proc.children(recursive=True):
                        self._known.setdefault(child.pid, child)

    def poll(self) -> int | None:
        return self._popen.poll()

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL every process of the tree and reap them; also after a normal exit (stray
        workers, daemons). Safe to call twice, from any thread and from a signal handler."""
        with self._lock:
            if not self._killed:
                self._killed = True
                self._freeze_and_kill()
                self.containment.kill()
        # With a timeout Popen.wait never blocks on its internal lock, which the interrupted
        # frame may hold; SIGKILL cannot be ignored, so the wait is short.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout=10)

    def _freeze_and_kill(self) -> None:
        # Stop until a walk finds no one new: a stopped process cannot fork.
        stopped: set[int] = set()
        while set(self._known) - stopped:
            self._signal_all(signal.SIGSTOP, skip=stopped)
            stopped |= set(self._known)
            self._discover()
        members = list(self._known.values())
        self._signal_all(signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        _await_death([p for p in members if p.pid != self.pid], timeout=5)

    def _signal_all(self, sig: signal.Signals, skip: Container[int] = frozenset()) -> None:
        for pid, proc in list(self._known.items()):
            if pid in skip:
                continue
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)


def _await_death(procs: list[psutil.Process], timeout: float) -> None:
    """Until every process is gone or a zombie. A zombie has already released all it held; only
    its parent can reap it, and an orphan's parent is PID 1, which in a container may reap it
    seconds later (1.6 s per trial here, where psutil.wait_procs waited for the reaping)."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        alive = []
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
        if not alive or time.monotonic() >= deadline:
            return
        procs = alive
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


@contextlib.contextmanager
def interrupt_guard(on_interrupt: Callable[[], None]) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM call ``on_interrupt`` and then raise KeyboardInterrupt.

    The trial runs in a session of its own, so a terminal's Ctrl-C never reaches it; without this
    an interrupted InfraRSI would leave the training running. Signal handlers can only be set in
    the main thread; elsewhere the caller owns interruption.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> NoReturn:
        on_interrupt()
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
