"""The memory watchdog: resident memory per rank, polled, with a kill above the budget.

One ``memory_info()`` costs 30–170 µs but walking the tree costs 2–4 ms (docs/measured.md), so the
RSS of the known members is read every ``poll_s`` and the tree is walked only every
``refresh_s``.

The budget is per rank. A plain script is one rank: its whole process tree (compile workers,
data-loader workers) counts. Under torchrun each worker's subtree is a rank, told apart by the
``LOCAL_RANK`` its processes inherit; the launcher agent belongs to no rank and is not counted.
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
RANK_VARIABLE = "LOCAL_RANK"


class MemoryWatchdog:
    """Watches ``process``; once a rank is above ``budget_bytes`` (None: watch only) calls
    ``on_exceed(level)`` once."""

    def __init__(
        self,
        process: TrialProcess,
        budget_bytes: int | None,
        on_exceed: Callable[[int], None],
        *,
        per_rank: bool = False,
        poll_s: float = POLL_S,
        refresh_s: float = REFRESH_S,
    ):
        """``per_rank``: the process is a launcher (torchrun) whose workers are the ranks."""
        self.rank_peaks: dict[int, int] = {}
        """Peak RSS of each rank's subtree, by local rank (one entry, 0, for a plain script)."""
        self.exceeded_at: int | None = None
        """The rank's RSS seen above the budget, when that happened."""
        self.exceeded_rank: int | None = None
        self.per_rank = per_rank
        self._process = process
        self._budget = budget_bytes
        self._on_exceed = on_exceed
        self._rank_of: dict[psutil.Process, int] = {}
        self._poll_s = poll_s
        self._refresh_s = refresh_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"infrarsi-watchdog-{process.pid}", daemon=True)

    @property
    def peak_bytes(self) -> int:
        """The largest rank's peak."""
        return max(self.rank_peaks.values(), default=0)

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
            for rank, rss in self._by_rank(members, classify=refresh).items():
                self.rank_peaks[rank] = max(self.rank_peaks.get(rank, 0), rss)
                if self._budget is not None and rss > self._budget:
                    self.exceeded_at, self.exceeded_rank = rss, rank
                    self._on_exceed(rss)
                    return
            self._stop.wait(self._poll_s)

    def _by_rank(self, members: list[psutil.Process], *, classify: bool) -> dict[int, int]:
        """Summed RSS by local rank; members of no rank (the launcher) are left out."""
        usage: dict[int, int] = {}
        for proc in members:
            rank = self._rank(proc, classify) if self.per_rank else 0
            if rank is None:
                continue
            with contextlib.suppress(psutil.Error):
                usage[rank] = usage.get(rank, 0) + proc.memory_info().rss
        return usage

    def _rank(self, proc: psutil.Process, classify: bool) -> int | None:
        if proc in self._rank_of or not classify:
            return self._rank_of.get(proc)
        # Only a rank found is remembered: a worker forked but not yet exec'd still shows the
        # launcher's environment, so it is asked again at the next walk.
        with contextlib.suppress(psutil.Error, ValueError):
            value = proc.environ().get(RANK_VARIABLE)
            if value is not None:
                self._rank_of[proc] = int(value)
        return self._rank_of.get(proc)
