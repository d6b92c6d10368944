"""Interference windows from cumulative counters (runner/interference.py): the arithmetic that
aligns them to steps and tells a disturbed step from a slow one. The real sampler under a real
hog is exercised end to end in tests/stages/test_disturbed.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from infrarsi.background import Background, Window, background
from infrarsi.runner.interference import InterferenceMonitor, Sample, TrialInterference, window
from infrarsi.runner.sandbox import Containment
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.whole_process import Lengths, Pair, judge

LIMITS = Background(cores=2, idle_cores=0.05, normal_cores=0.1, limit_cores=0.4, normal_denied=0.02,
                    limit_denied=0.17, busy=False)


def samples(rate: dict[str, float], seconds: int = 10) -> list[Sample]:
    """One sample a second of counters growing at ``rate`` per second."""
    return [Sample(at=100.0 + t, tree_cpu_s=rate.get("tree", 0) * t, tree_wait_s=rate.get("wait", 0) * t,
                   threads=2, busy_s=rate.get("busy", 0) * t, steal_s=rate.get("steal", 0) * t,
                   own_cpu_s=rate.get("own", 0) * t) for t in range(seconds + 1)]


def test_others_are_the_busy_time_left_after_the_job_and_infrarsi():
    w = window(samples({"tree": 1.5, "busy": 1.9, "own": 0.1, "wait": 0.5}), 102.0, 104.0, cores=2)
    assert w.seconds == 2.0
    assert w.others_cores == pytest.approx(0.3)
    assert w.job_share == pytest.approx(0.75)
    assert w.denied == pytest.approx(0.25)
    assert w.disturbed(LIMITS)  # waited 25% of its runnable time while others used 0.3 cores


def test_a_window_between_samples_is_interpolated():
    s = samples({"busy": 1.0})
    s = s[:3] + [Sample(at=103.0, tree_cpu_s=0, tree_wait_s=0, threads=1, busy_s=4.0, steal_s=0, own_cpu_s=0)]
    # busy 0,1,2 then 4 at t=103: the second half of [102, 103] ran at 2 cores.
    assert window(s, 102.5, 103.0, cores=2).others_cores == pytest.approx(2.0)
    assert window(s, 101.0, 102.0, cores=2).others_cores == pytest.approx(1.0)


def test_no_window_is_read_across_the_jobs_end():
    """The job stopped at 103.5; its exit's work (other processes' CPU from 103.5 to 104) lands in
    the sample at 104, which would spread it over a step that ended at 103.4."""
    s = samples({"tree": 1.0, "busy": 1.0}, seconds=3)
    s.append(Sample(at=104.0, tree_cpu_s=3.5, tree_wait_s=0, threads=2, busy_s=5.5, steal_s=0, own_cpu_s=0))
    assert window(s, 103.3, 103.4, cores=2).others_cores == pytest.approx(2.0)  # the smear
    assert window(s, 103.3, 103.4, cores=2, job_ended=103.5) is None
    # A step whose closing sample came before the end is read as before.
    assert window(s, 102.5, 102.9, cores=2, job_ended=103.5).others_cores == pytest.approx(0.0)


def test_a_job_waiting_only_for_its_own_threads_is_not_disturbed():
    w = window(samples({"tree": 2.0, "busy": 2.0, "wait": 2.0}), 101.0, 105.0, cores=2)
    assert w.denied == pytest.approx(0.5) and w.others_cores == pytest.approx(0.0)
    assert not w.disturbed(LIMITS)


def test_waiting_counts_only_while_others_use_more_than_their_normal():
    # A machine whose normal is a standing load of 1.4 of 2 cores (measured again under it): a
    # candidate with more threads than the baseline waits more against that same load.
    standing = background(2, 2.0, [Window(seconds=1, others_cores=1.4, steal_cores=0, job_share=0.6,
                                          denied=0.35)] * 10)
    more_threads = Window(seconds=1, others_cores=1.3, steal_cores=0, job_share=0.5, denied=0.55)
    assert more_threads.denied > standing.limit_denied and not more_threads.disturbed(standing)
    # The same waiting while others take more than their normal is a disturbance, and says so.
    heavier = Window(seconds=1, others_cores=1.5, steal_cores=0, job_share=0.5, denied=0.55)
    assert heavier.disturbed(standing) and "more than their normal 1.40" in heavier.why(standing)


def test_steal_counts_as_others():
    w = window(samples({"tree": 1.0, "busy": 1.0, "steal": 0.5}), 101.0, 103.0, cores=2)
    assert w.load_cores == pytest.approx(0.5) and w.disturbed(LIMITS)


def test_the_background_is_doctors_normal_plus_a_margin():
    quiet = [Window(seconds=1, others_cores=x, steal_cores=0, job_share=1, denied=d)
             for x, d in [(0.05, 0.0), (0.1, 0.01), (0.2, 0.03)] * 4]
    bg = background(2, 0.05, quiet)
    assert bg.normal_cores == pytest.approx(0.2) and bg.limit_cores == pytest.approx(0.5)
    assert bg.limit_denied == pytest.approx(1 - 0.97 / 1.2, abs=1e-3) and not bg.busy
    # Busy before the baseline ran: said, but the normal is what the baseline's steps saw.
    busy = background(2, 1.2, quiet)
    assert busy.busy and busy.limit_cores == pytest.approx(0.5)
    loaded = [Window(seconds=1, others_cores=1.0, steal_cores=0, job_share=0.5, denied=0.4)] * 10
    assert background(2, 1.2, loaded).limit_cores == pytest.approx(1.3)
    # On a saturated machine the job already waits 40% of the time: disturbed once its share drops a sixth more.
    assert background(2, 1.2, loaded).limit_denied == pytest.approx(0.5, abs=1e-3)


def test_a_trial_is_disturbed_by_a_quarter_of_its_measured_steps_not_by_its_start_up():
    calm = Window(seconds=2, others_cores=0.1, steal_cores=0, job_share=1, denied=0.0)
    hog = Window(seconds=1, others_cores=1.0, steal_cores=0, job_share=0.5, denied=0.5)
    record = TrialInterference(cores=2, limits=LIMITS, startup=calm, steps=[hog, hog] + [calm] * 7 + [hog],
                               measured_from=2)
    assert record.disturbed() == ""  # the warm-up's disturbed steps do not count; 1 of 8 measured does not
    record.steps[5] = hog
    assert "2 of 8 measured steps disturbed" in record.disturbed()
    assert TrialInterference(cores=2, limits=LIMITS, startup=hog, steps=[calm] * 4).disturbed() == ""
    assert TrialInterference(cores=2, limits=None, startup=hog, steps=[hog] * 4).disturbed() == ""


def test_a_few_steps_that_held_a_quarter_of_the_time_disturb_the_trial():
    # Round five's A/A campaign 2 (docs/benchmarks.md): 6 of 56 steps slowed from 0.2 s to 10 s by
    # another process on one of the two cores; the run took 39 s against 13.
    calm = Window(seconds=0.2, others_cores=0.02, steal_cores=0, job_share=1, denied=0.03)
    hog = Window(seconds=10.0, others_cores=0.96, steal_cores=0, job_share=0.5, denied=0.5)
    long = TrialInterference(cores=2, limits=LIMITS, steps=[calm] * 50 + [hog] * 6, measured_from=3)
    assert "6 of 56 steps disturbed, 60.0 s of the steps' 70.0 s" in long.disturbed()
    # A short run's warm-up is its whole measurement: 2.9 s of process became 5.8 s.
    short = TrialInterference(cores=2, limits=LIMITS, measured_from=2,
                              steps=[replace(hog, seconds=1.6), replace(hog, seconds=1.1), calm])
    assert "2 of 3 steps disturbed" in short.disturbed()
    assert TrialInterference(cores=2, limits=LIMITS, steps=[calm] * 50 + [replace(hog, seconds=0.2)] * 6,
                             measured_from=3).disturbed() == ""


def _watched(code: str, containment: Containment | None = None) -> tuple[InterferenceMonitor, Window]:
    """A real Python process running ``code`` (in ``containment``'s cgroup when given), monitored
    from start to exit, the walk of its tree knowing only that process; the whole window."""
    child = subprocess.Popen([sys.executable, "-c", code], preexec_fn=containment.preexec if containment else None)
    try:
        monitor = InterferenceMonitor(child.pid, lambda: [child.pid],
                                      cgroup=containment.cgroup if containment else None).start()
        began = time.monotonic()
        child.wait()
        ended = time.monotonic()
        monitor.stop()
    finally:
        child.kill()
    return monitor, monitor.window(began, ended)


def test_the_monitor_reads_a_real_process_tree():
    monitor, w = _watched("import time\nend = time.time() + 1.0\nwhile time.time() < end: pass")
    assert monitor.cores == frozenset(os.sched_getaffinity(0))
    # It spun for a second: the tree's CPU plus its wait for a CPU cover most of that second.
    assert w.job_share > 0 and w.denied < 1
    assert monitor.samples[-1].tree_cpu_s + monitor.samples[-1].tree_wait_s > 0.5


def test_short_lived_children_no_walk_saw_are_still_the_jobs():
    # The job runs Python children one after another (as a launcher's `sh` or `ldconfig` calls
    # do); the walk of the tree only ever knows the job itself, yet their CPU is the job's.
    spawn = ("import subprocess, sys\nfor _ in range(8):\n"
             "    subprocess.run([sys.executable, '-c', 'x = 0\\nfor i in range(2_000_000): x += i'])")
    _, w = _watched(spawn)
    assert w.job_share > 0.5 and w.others_cores < 0.3, w


def test_a_member_no_walk_found_spends_the_jobs_cpu_in_its_cgroup():
    # The job's child spins while the job waits for it: alive, never reaped, never found by the
    # walk (as a member is for up to the walk's 0.2 s): the trial's cgroup counts it as the job's.
    containment = Containment()
    if containment.cgroup is None:
        pytest.skip("no cgroup v2 this process may make children in")
    spawn = ("import subprocess, sys\n"
             "subprocess.run([sys.executable, '-c', 'import time\\nend = time.time() + 1\\nwhile time.time() < end: pass'])")
    try:
        _, w = _watched(spawn, containment)
    finally:
        containment.kill()
    assert w.job_cores > 0.6 and w.others_cores < 0.3, w


LENGTHS = Lengths(short=1, long=5, planned=100)


def result(status: TrialStatus, step: float) -> Pair:
    """One round: both lengths at ``step`` seconds a step, with a second of start-up."""
    def one(steps: int) -> TrialResult:
        return TrialResult(status=status, candidate=Candidate(knobs={"x": 1}), step_times=[step] * 4, startup_s=1.0,
                           losses=[1.0, 0.9], stopped_s=1.0 + steps * step, process_s=1.2 + steps * step)
    return Pair(short=one(LENGTHS.short), long=one(LENGTHS.long))


def test_a_round_still_disturbed_after_its_reruns_is_a_missing_measurement_not_a_failure():
    base = [result(TrialStatus.OK, 1.0) for _ in range(3)]
    runs = [result(TrialStatus.OK, 0.5), result(TrialStatus.DISTURBED, 3.0), result(TrialStatus.OK, 0.5),
            result(TrialStatus.OK, 0.5)]
    verdict = judge(Candidate(knobs={"x": 1}), base, runs, lengths=LENGTHS, floor=1.05, compare_steps=2)
    assert "ended" not in verdict.reason
    assert verdict.cand_step_s == pytest.approx([0.5, 0.5, 0.5]) and verdict.statuses.count("disturbed") == 2


def test_a_candidate_whose_every_rerun_was_disturbed_has_no_verdict_but_says_why():
    base = [result(TrialStatus.OK, 1.0) for _ in range(3)]
    verdict = judge(Candidate(knobs={"x": 1}), base, [result(TrialStatus.DISTURBED, 3.0)] * 3,
                    lengths=LENGTHS, floor=1.05, compare_steps=2)
    assert not verdict.promoted and "disturbed" in verdict.reason and verdict.job_speedup is None
