"""The plots' data (OOMs censored above the budget) and the PNG files."""

from __future__ import annotations

from infrarsi.report.plots import draw_all, memory_plot_data, prior_plot_data
from infrarsi.stages.report import report

PNG = b"\x89PNG\r\n\x1a\n"


def test_ooms_are_censored_at_the_level_seen_and_never_drawn_as_points(repo):
    r = report(repo, formats=()).report
    data = memory_plot_data(r)
    ooms = {t.number: t for t in r.trials if t.status == "oom"}
    assert {c.number for c in data.censored} == set(ooms) and len(ooms) == 2
    assert not {p.number for p in data.points} & set(ooms)
    for c in data.censored:
        seen = ooms[c.number].peak_bytes
        assert c.level_bytes == max(r.budget_bytes, seen or 0) >= r.budget_bytes
        assert c.step_s == ooms[c.number].step_s
    # One was killed above the budget at a level the watchdog saw, one with no level: the budget.
    assert sorted(c.level_bytes > r.budget_bytes for c in data.censored) == [False, True]


def test_prior_plot_marks_the_miscalibrated_and_skips_what_the_data_cannot_show(repo):
    points = {(p.key, p.quantity): p for p in prior_plot_data(report(repo, formats=()).report)}
    assert points[("dtype=bfloat16", "time")].miscalibrated
    assert points[("dtype=bfloat16", "time")].observed[0] > 1 > points[("dtype=bfloat16", "time")].prior[0]
    assert points[("compile=True", "memory")].observed is None  # infinite sd: no data


def test_every_plot_is_written_as_a_png(repo, tmp_path):
    plots = draw_all(report(repo, formats=()).report, tmp_path / "plots")
    assert set(plots) == {"timeline", "memory", "prices", "priors"}
    for path in plots.values():
        data = path.read_bytes()
        assert data.startswith(PNG) and len(data) > 5000
