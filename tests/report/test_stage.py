"""The report stage: files written, HTML self-contained, refusals."""

from __future__ import annotations

import re

from infrarsi.stages.report import report


def test_writes_markdown_html_and_plots_under_the_state_dir(repo):
    result = report(repo)
    assert result.status == "ok", result.message
    state_dir = repo / ".infrarsi"
    assert result.paths[:2] == [str(state_dir / "report.md"), str(state_dir / "report.html")]
    pngs = sorted((state_dir / "report").glob("*.png"))
    assert [str(p) for p in sorted(result.paths[2:])] == [str(p) for p in pngs] and len(pngs) == 4
    md = (state_dir / "report.md").read_text()
    for words in ("## Baseline against promoted",
                  "python train.py --batch_size=16 --max_iters=1000 --micro_batch_size=8",
                  "writes +zero_grad_set_to_none into the source", "+    optimizer.zero_grad(set_to_none=True)",
                  "✗ miscalibrated", "](report/memory.png)", "| all failures | 7 |",
                  "search trials: the budget of 12 trials."):
        assert words in md, words


def test_every_verified_candidate_shows_its_whole_process_and_record_figures(repo):
    report(repo, formats=("md",))
    md = (repo / ".infrarsi" / "report.md").read_text()
    table = md[md.index("## Re-verified candidates"):]
    table = table[:table.index("\n\n", table.index("|"))]
    assert "| job speedup (95% CI) | per step | per step by its records |" in table
    rows = [line for line in table.splitlines()[1:] if line.startswith("|") and "×" in line]
    assert rows and all(line.count("×") == 3 for line in rows), rows


def test_html_is_self_contained(repo):
    report(repo, formats=("html",))
    page = (repo / ".infrarsi" / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "<link" not in page and "<script" not in page
    images = re.findall(r"<img [^>]*src=\"([^\"]+)\"", page)
    assert len(images) == 4 and all(src.startswith("data:image/png;base64,") for src in images)
    assert "set_to_none=True" in page and 'class="bad"' in page


def test_refuses_when_a_locked_file_changed(repo):
    (repo / "data.py").write_text((repo / "data.py").read_text() + "\nNOISE = 0.2\n")
    result = report(repo)
    assert result.status == "refused" and "data.py" in result.message and "changed" in result.message
    assert not (repo / ".infrarsi" / "report.md").exists()


def test_no_run_yet_is_a_clear_error(repo):
    (repo / ".infrarsi" / "run.json").unlink()
    result = report(repo)
    assert result.status == "error" and "no run yet" in result.message and "infrarsi run" in result.message


def test_no_contract_is_refused(bare_repo):
    result = report(bare_repo)
    assert result.status == "refused" and "infrarsi init" in result.message


def test_a_rejected_patch_title_is_markdown_text_not_markup(repo):
    """A title and reason come from a model's reply: in report.md they must stay text (no link, image,
    HTML, heading or emphasis of their own)."""
    from infrarsi.records import PatchCheck, load_run, save_run

    run = load_run(repo)
    title = "<img src=x onerror=alert(1)> [click here](http://evil.example) **now**"
    run.patch_checks.append(PatchCheck(name="llm:0badc0de", status="numerics", reason=f"{title}: loss diverged",
                                       cost_s=1.0))
    save_run(run, repo)
    assert report(repo).status == "ok"
    md = (repo / ".infrarsi" / "report.md").read_text()
    assert "llm:0badc0de" in md
    assert "<img" not in md.replace("\\<img", "") and "](http://evil" not in md.replace("\\](http://evil", "")
    assert "**now**" not in md and "\\<img src=x onerror=alert(1)\\>" in md
