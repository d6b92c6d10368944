"""Jobs that try to learn how many steps their run will take (issue 49): a job that knew could spend
time only in the runs that stop early (docs/launcher.md, "The deciding number").

InfraRSI answers a step record by writing ``c`` or ``s`` to ``ctl-<pid>`` beside the record
channel, both in the job's writable workspace. So a job can write step records of its own into the
channel, make the control FIFO their pid names and read what arrives there. Each job here does that
for real, in a trial of a small script, and prints what it read: records the step feed does not
count get no answer (infrarsi/launcher/streams.py holds the rule both follow).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus
from tests.runner.conftest import make_contract

pytestmark = pytest.mark.e2e
STEPS = 6  # the runner contract's 2 warm-up + 4 measured steps
FRESH = 4_000_000
"""Pids no process of the trial has (pid_max is 4194304 at most, and a trial starts a few)."""

FORGE = """
    import json, os, select, sys, time

    CHANNEL = os.environ["INFRARSI_RECORDS"]
    writer = os.open(CHANNEL, os.O_WRONLY)


    def forge(streams, steps=8):
        # Step records for each forged stream, each with the control FIFO InfraRSI would answer it
        # on; every byte that arrives there within a second is printed the moment it is read.
        readers = {}
        for name, who in streams.items():
            path = os.path.join(os.path.dirname(CHANNEL), f"ctl-{who['pid']}")
            if not os.path.exists(path):
                os.mkfifo(path, 0o600)
            readers[os.open(path, os.O_RDWR | os.O_NONBLOCK)] = name
        for i in range(steps):
            for who in streams.values():
                record = {"kind": "step", "step": i, "t": time.clock_gettime(time.CLOCK_MONOTONIC), "loss": 1.0, **who}
                os.write(writer, (json.dumps(record) + "\\n").encode())
        learned = dict.fromkeys(streams.keys(), "")
        until = time.monotonic() + 1.0
        while time.monotonic() < until:
            for fd in select.select(list(readers), [], [], max(0.0, until - time.monotonic()))[0]:
                answer = os.read(fd, 64).decode()
                learned[readers[fd]] += answer
                print(f"ANSWER {readers[fd]}: {answer}", flush=True)
        return learned
"""

TRAIN = """
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    for step in range(1000):
        model(x).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        after_step(step)
"""


def _trial(tmp_path: Path, script: str):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text(textwrap.dedent(FORGE) + textwrap.dedent(script) + textwrap.dedent(TRAIN))
    (repo / "helpers.py").write_text("SCALE = 1.0\n")
    contract = make_contract(repo, knob_list=[])
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(), timeout_s=120, check_loss=False))
    return result, Path(result.log_path).read_text()


def _learned(log: str) -> dict[str, str]:
    return json.loads(next(line for line in log.splitlines() if line.startswith("LEARNED "))[len("LEARNED "):])


DROPPED_BEFORE_STEP_0 = f"""
    # Before the job's first forward: streams whose records the step feed drops.
    learned = forge({{
        "rank null": {{"pid": {FRESH}, "rank": None}},
        "no rank": {{"pid": {FRESH + 1}}},
        "rank as text": {{"pid": {FRESH + 2}, "rank": "0"}},
        "rank true": {{"pid": {FRESH + 3}, "rank": True}},
        "negative rank": {{"pid": {FRESH + 4}, "rank": -1}},
        "pid as text": {{"pid": "{FRESH + 5}", "rank": 0}},
        "pid as float": {{"pid": {FRESH + 6}.0, "rank": 0}},
        "pid zero": {{"pid": 0, "rank": 0}},
    }})
    print("LEARNED " + json.dumps(learned), flush=True)


    def after_step(step):
        pass
"""


def test_step_records_the_feed_drops_get_no_answer_before_step_0(tmp_path):
    result, log = _trial(tmp_path, DROPPED_BEFORE_STEP_0)
    learned = _learned(log)
    assert not any(learned.values()), f"the job learned its length before step 0: {learned}"
    assert "ANSWER" not in log
    # The forged records changed nothing: the run's own steps, all of them, and only them.
    assert result.status is TrialStatus.OK, result.detail
    assert result.steps_run == STEPS and len(result.losses) == STEPS


BESIDE_THE_RUN = f"""
    def after_step(step):
        if step != 0:
            return
        # Step 0 is done and answered: now streams beside the run's own, and a forked child's.
        if os.fork() == 0:
            forge({{"forked child": {{"pid": os.getpid(), "rank": 0}}}})
            os._exit(0)
        forge({{"fresh pid": {{"pid": {FRESH}, "rank": 0}}, "another rank": {{"pid": {FRESH + 1}, "rank": 1}}}})
        os.wait()
"""


def test_a_stream_beside_the_runs_own_gets_no_answer_and_breaks_the_contract(tmp_path):
    result, log = _trial(tmp_path, BESIDE_THE_RUN)
    assert "ANSWER" not in log, log
    assert result.status is TrialStatus.CONTRACT, result.detail
    assert "beside" in result.detail, result.detail


AHEAD_OF_THE_RUN = f"""
    # Before the job's first forward, a stream the feed would count: it takes the run's place.
    learned = forge({{"ahead": {{"pid": {FRESH}, "rank": 0}}}}, steps={STEPS})
    print("LEARNED " + json.dumps(learned), flush=True)


    def after_step(step):
        pass
"""


def test_a_stream_forged_ahead_of_the_runs_own_is_the_run_and_the_launchers_then_breaks_the_contract(tmp_path):
    """What such a job learns it learns by being counted: one answer per step the feed counted, the
    stop after the run's steps. Its own process then steps beside that stream and is refused."""
    result, log = _trial(tmp_path, AHEAD_OF_THE_RUN)
    assert _learned(log) == {"ahead": "c" * (STEPS - 1) + "s"}
    assert result.status is TrialStatus.CONTRACT, result.detail
    assert "beside" in result.detail, result.detail
