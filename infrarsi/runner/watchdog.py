"""The memory watchdog: the process tree's resident memory, polled, with a kill above the budget.

One ``memory_info()`` costs 30–170 µs but walking the tree costs 2–4 ms (MEASURED.md), so the
RSS of the known members is read every ``poll_s`` and the tree is walked only every
``refresh_s``. RSS is summed over the tree: pages the ranks share count once per rank, which
errs on the side of the budget.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import psutil

from infrarsi.runner.process import TrialProcess

POLL_S = 0.02
REFRESH_S = 0.2


class MemoryWatchdog:
    """Watches ``process``; above ``budget_bytes`` (None: watch only) calls ``on_exceed(level)`` once."""

    def __init__(
        self,
        process: TrialProcess,
        budget_bytes: int | None,
        on_exceed: Callable[[int], None],
        *,
        poll_s: float = POLL_S,
        refresh_s: float = REFRESH_S,
    ):
        self.peak_bytes = 0
        self.exceeded_at: int | None = None
        """The tree RSS seen above the budget, when that happened."""
        self._process = process
        self._budget = budget_bytes
        self._on_exceed = on_exceed
        self._poll_s = poll_s
        self._refresh_s = refresh_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"infrarsi-watchdog-{process.pid}", daemon=True)

    def start(self) -> MemoryWatchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        next_refresh = 0.0
        while not self._stop.is_set():
            now = time.perf_counter()
            refresh = now >= next_refresh
            if refresh:
                next_refresh = now + self._refresh_s
            members = self._process.members(refresh=refresh)
            rss = _tree_rss(members)
            self.peak_bytes = max(self.peak_bytes, rss)
            if self._budget is not None and rss > self._budget:
                self.exceeded_at = rss
                self._on_exceed(rss)
                return
            self._stop.wait(self._poll_s)


def _tree_rss(members: list[psutil.Process]) -> int:
    total = 0
    for proc in members:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total
