"""Which records are steps: the one rule the step feed counts by (:class:`infrarsi.runner.measure.StepFeed`)
and the step control answers by (:class:`infrarsi.launcher.control.StepControl`).

The job's code runs beside the launcher and can write any record into the channel, and make any
control FIFO, so the control must answer exactly the records the feed counts: an answer to a record
the feed drops would tell the job its run's length for free (issue 49). Each of them keeps a
:class:`StepStreams` of its own; both see every record in the order it arrived, so they agree.

A step record counts when:

- its ``pid`` is an int above 0 and its ``rank`` an int of 0 or more (never a bool, a float or
  text: the launcher writes ``os.getpid()`` and ``RANK``);
- its ``step`` is an int, the number of steps its pid has counted so far, and its rank the one
  that pid first stepped as;
- its pid is one of the run's streams: the first to send a step 0, one per rank, as many as the
  command starts processes that step (``ranks``; any number of ranks when unknown).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Verdict:
    step: int | None = None
    """The index of the step the record ends, when it counts."""
    problem: str = ""
    """Why a step record of a well-formed stream does not count: it cannot be the launcher's."""


def stream_of(record: dict) -> tuple[int, int] | None:
    """The record's (pid, rank) when both are what the launcher writes, else None."""
    pid, rank = record.get("pid"), record.get("rank")
    if type(pid) is not int or type(rank) is not int or pid <= 0 or rank < 0:
        return None
    return pid, rank


class StepStreams:
    """Judges step records in arrival order (module docstring)."""

    def __init__(self, ranks: int | None):
        self.ranks = ranks
        self._counts: dict[int, int] = {}
        self._rank_of: dict[int, int] = {}
        self._pid_of: dict[int, int] = {}

    def judge(self, record: dict) -> Verdict:
        """Whether ``record`` is a step of the run; a counted step is counted here, once."""
        stream = stream_of(record) if record.get("kind") == "step" else None
        if stream is None:
            return Verdict()
        pid, rank = stream
        where = f"rank {rank} (pid {pid})"
        count = self._counts.get(pid, 0)
        if type(record.get("step")) is not int or record["step"] != count:
            return Verdict(problem=f"{where} reported step {record.get('step')!r} after {count} steps: "
                                   "the records are not the launcher's")
        if pid in self._counts and self._rank_of[pid] != rank:
            return Verdict(problem=f"pid {pid} stepped as rank {self._rank_of[pid]}, then as rank {rank}: "
                                   "the records are not the launcher's")
        if pid not in self._counts:
            if rank in self._pid_of:
                return Verdict(problem=f"{where} stepped beside pid {self._pid_of[rank]}, the run's rank {rank}: "
                                       "it is no stream of this run, and is never answered")
            if self.ranks is not None and len(self._counts) >= self.ranks:
                return Verdict(problem=f"{where} stepped beside the {self.ranks} stepping process(es) the "
                                       "command starts: it is no stream of this run, and is never answered")
            self._rank_of[pid], self._pid_of[rank] = rank, pid
        self._counts[pid] = count + 1
        return Verdict(step=count)
