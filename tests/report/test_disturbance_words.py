"""What the report says of the machine's normal measured again (report/disturbance.py)."""

from dataclasses import replace

from infrarsi.background import Background
from infrarsi.records import Disturbance, Renormalization, RerunRow
from infrarsi.report.disturbance import words

BACKGROUND = Background(cores=2, idle_cores=0.1, normal_cores=0.2, limit_cores=0.5, limit_denied=0.2, busy=False)


def disturbance(*renormalized: Renormalization) -> Disturbance:
    return Disturbance(trials=2, of_trials=5, seconds=4.0, share=0.4, unresolved=(4,), max_reruns=2,
                       reruns=(RerunRow(trial=2, of=1, kind="search", candidate={}, status="disturbed", of_detail=""),),
                       background=BACKGROUND, renormalized=renormalized, waited_s=0.0)


def test_a_normal_measured_again_says_the_new_limit():
    now = replace(BACKGROUND, normal_cores=1.4, limit_cores=1.7)
    said = words(disturbance(Renormalization(after_trial=2, trial=3, stopped=False, background=now, slowdown=1.2)))
    assert any("other processes now use 1.40 of 2 cores, the baseline runs 1.20x slower, and later trials were "
               "judged against that (1.70 cores)" in line for line in said), said


def test_a_normal_that_could_not_be_measured_again_says_why_and_what_judged_the_rest():
    said = words(disturbance(Renormalization(after_trial=2, trial=3, stopped=False, failed="crash: exit code 1")))
    assert any("measuring the machine's normal again failed (trial 3, a baseline run, ended crash: exit code 1), "
               "so later trials were judged against doctor's normal" in line for line in said), said
    assert any("1 still disturbed after 2 reruns" in line for line in said), said
