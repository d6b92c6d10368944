"""The rerun loop the run's session and verify share (experiment/quiet.py), and the disturbance
summary reading a rerun's provenance from its field: no trial runs here."""

from __future__ import annotations

from infrarsi.background import Background
from infrarsi.experiment import quiet
from infrarsi.records import TrialRow
from infrarsi.trials import Candidate, TrialResult, TrialStatus


def result(status: TrialStatus) -> TrialResult:
    return TrialResult(status=status, candidate=Candidate(knobs={"threads": 2}))


def test_a_disturbed_trial_is_rerun_at_most_max_reruns_times_and_the_last_is_marked():
    seen: list[tuple[int, bool]] = []

    def rerun(again: quiet.Rerun) -> TrialResult:
        seen.append((again.attempt, again.last))
        return result(TrialStatus.DISTURBED)

    out = quiet.until_undisturbed(result(TrialStatus.DISTURBED), rerun)
    assert out.status is TrialStatus.DISTURBED
    assert seen == [(n, n == quiet.MAX_RERUNS) for n in range(1, quiet.MAX_RERUNS + 1)]


def test_the_loop_ends_at_the_first_undisturbed_result_and_never_reruns_none_or_a_failure():
    firsts: list[TrialResult] = []

    def rerun(again: quiet.Rerun) -> TrialResult:
        firsts.append(again.disturbed)
        return result(TrialStatus.OK)

    disturbed = result(TrialStatus.DISTURBED)
    assert quiet.until_undisturbed(disturbed, rerun).status is TrialStatus.OK and firsts == [disturbed]
    assert quiet.until_undisturbed(result(TrialStatus.CRASH), rerun).status is TrialStatus.CRASH
    assert quiet.until_undisturbed(None, rerun) is None and len(firsts) == 1


def row(number: int, status: str, rerun_of: int | None = None, reason: str = "search") -> TrialRow:
    return TrialRow(number=number, kind="search", status=status, candidate={}, step_s=None, job_s=None,
                    peak_bytes=None, wall_s=2.0, detail=f"detail {number}", reason=reason, rerun_of=rerun_of)


def test_the_summary_reads_what_a_rerun_repeats_from_its_field_not_its_words():
    rows = [row(1, "disturbed"), row(2, "ok", rerun_of=1, reason=quiet.rerun_reason(1, "search")),
            row(3, "disturbed"), row(4, "ok", reason=quiet.rerun_reason(3, "search"))]
    summary = quiet.summary(rows, 8.0, 0.0, Background.unmeasured(2), [])
    assert [(r.trial, r.of, r.of_detail) for r in summary.reruns] == [(2, 1, "detail 1")]
    assert summary.unresolved == (3,) and summary.trials == 2 and summary.share == 0.5
    assert rows[1].reason == "rerun of trial 1 (disturbed): search"
