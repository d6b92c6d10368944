"""What reproduces the promoted configuration: the command with the settings the script takes as
flags or variables, after `infrarsi apply` where settings or patches live in the source; the
same in the terminal outcome, report.md, report.html and apply's commit message."""

from __future__ import annotations

from infrarsi.cli import outcome
from infrarsi.report import document, html, markdown
from infrarsi.report.reproduce import reproduce_command
from infrarsi.stages.apply import ApplyResult, ApplyStatus, commit_message
from infrarsi.stages.optimize import OptimizeResult
from infrarsi.stages.report import ReportResult
from tests.report.values import REPO, candidate, contract, report, row, run, verdict


def promoted_report(cand):
    return report(run([row(0, "baseline", "ok", 150.0)], [verdict(cand, (1.2, 1.1, 1.3), promoted=True)]))


def test_flags_and_variables_alone_reproduce_it_and_the_job_runs_its_own_length():
    audit = promoted_report(candidate(micro_batch=8, launcher_threads=2)).promoted_audit
    assert audit.in_source == [] and audit.command == "OMP_NUM_THREADS=2 python train.py --micro_batch=8"


def test_a_setting_written_in_the_source_needs_apply_first():
    audit = promoted_report(candidate(attention="sdpa")).promoted_audit
    assert audit.in_source == ["attention=sdpa"] and audit.command == "python train.py"


def test_mixed_settings_say_both_parts():
    audit = promoted_report(candidate(attention="sdpa", micro_batch=8, patches=["sdpa_attention"])).promoted_audit
    assert audit.in_source == ["attention=sdpa", "+sdpa_attention"]
    assert audit.command == "python train.py --micro_batch=8"


def test_a_flag_a_patch_adds_needs_the_patch_applied_first():
    audit = promoted_report(candidate(grad_accum_splits=4)).promoted_audit
    assert audit.patches == ["gradient_accumulation"] and audit.in_source == ["+gradient_accumulation"]
    assert audit.command == "python train.py --grad_accum_splits=4"


def test_the_step_count_is_the_one_every_trial_told_the_job():
    # init passes the short trial length as a flag every trial carries (workload.args); trials
    # replace it with the owner's length, and so does the command a person runs.
    short = contract(args={"max_iters": 5})
    assert reproduce_command(candidate(micro_batch=8), short) == "python train.py --max_iters=500 --micro_batch=8"
    longer = contract(planned_steps=2000)
    assert reproduce_command(candidate(), longer) == "python train.py --max_iters=2000"
    assert reproduce_command(candidate(), contract(cwd="sub")) == "cd sub && python train.py"


def _outcome(r, applied=None):
    result = OptimizeResult(status=r.run_status, message=r.run_message, run=None,
                            report=ReportResult(status="ok", message="", paths=[f"{REPO}/.infrarsi/report.md"],
                                                report=r),
                            apply=applied)
    return outcome.lines(result, 80, REPO)


def test_the_terminal_says_where_the_command_reproduces_it():
    flags = _outcome(promoted_report(candidate(micro_batch=8)))
    at = flags.index("Reproduce:")
    assert flags[at + 1] == "  python train.py --micro_batch=8"
    source = _outcome(promoted_report(candidate(attention="sdpa", micro_batch=8)))
    at = next(i for i, line in enumerate(source) if line.startswith("Reproduce, after `infrarsi apply"))
    assert source[at:at + 3] == [  # the heading at the margin: only the command is indented, to copy
        f"Reproduce, after `infrarsi apply {REPO}` writes attention=sdpa into the", "source:",
        "  python train.py --micro_batch=8"]
    committed = ApplyResult(status=ApplyStatus.COMMITTED, message="", branch="infrarsi/20260105-101500-abcd",
                            commit="0123456789abcdef")
    applied = _outcome(promoted_report(candidate(attention="sdpa")), committed)
    at = applied.index("Reproduce, on branch infrarsi/20260105-101500-abcd:")
    assert applied[at + 1] == "  python train.py"


def test_markdown_and_html_say_apply_comes_first(tmp_path):
    r = promoted_report(candidate(attention="sdpa", micro_batch=8))
    blocks = document.blocks(r, {})
    md = markdown.render(blocks, tmp_path)
    assert f"After `infrarsi apply {REPO}` writes attention=sdpa into the source" in md
    assert "```sh\npython train.py --micro_batch=8\n```" in md
    page = html.render(blocks, "report")
    assert f"After <code>infrarsi apply {REPO}</code> writes attention=sdpa into the source" in page
    assert "<pre><code>python train.py --micro_batch=8</code></pre>" in page
    # Flags alone: the command, and how to commit it for review.
    plain = markdown.render(document.blocks(promoted_report(candidate(micro_batch=8)), {}), tmp_path)
    assert "```sh\npython train.py --micro_batch=8\n```" in plain
    assert "writes" not in plain.split("## Reproduce")[1][:80]


def test_the_commit_message_says_the_command_that_runs_it_at_that_commit():
    cand = candidate(attention="sdpa", micro_batch=8, launcher_threads=2)
    v = verdict(cand, (1.2, 1.1, 1.3), promoted=True)
    message = commit_message(run([row(0, "baseline", "ok", 150.0)], [v]), v, contract(), ["model.py", "train.py"],
                             ["OMP_NUM_THREADS=2"])
    assert "Reproduce at this commit: OMP_NUM_THREADS=2 python train.py --micro_batch=8\n" in message
