"""The server's commands over stdio: apply commits, optimize reports progress, cancel kills the trials."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import psutil
import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled
from pytest_lsp import LanguageClient

from infrarsi.patches import REGISTRY
from tests.server.conftest import git
from tests.server.lsp import diagnostics_for, line_of, open_file, until
from tests.server.runs import promoted_run


def _command(name: str, **options) -> types.ExecuteCommandParams:
    return types.ExecuteCommandParams(command=f"infrarsi.server.{name}", arguments=[options])


async def test_apply_commits_the_promoted_candidate_on_a_new_branch(client: LanguageClient, repo: Path):
    run = promoted_run(repo)
    model_before = (repo / "model.py").read_text()
    head = git(repo, "rev-parse", "HEAD")
    result = await client.workspace_execute_command_async(_command("apply", workspace=str(repo)))
    assert result["status"] == "committed", result
    branch = f"infrarsi/{run.run_id}"
    assert result["branch"] == branch
    assert git(repo, "rev-parse", branch) == result["commit"]
    assert git(repo, "rev-parse", f"{branch}^") == head
    assert sorted(git(repo, "diff", "--name-only", head, branch).splitlines()) == ["model.py", "train.py"]
    assert git(repo, "show", f"{branch}:model.py") + "\n" == REGISTRY["sdpa_attention"].rewrite(model_before)
    assert 'default=8' in git(repo, "show", f"{branch}:train.py").split('"--micro_batch_size"')[1].splitlines()[0]
    assert git(repo, "log", "-1", "--format=%s", branch).startswith("infrarsi: 1.21x faster")
    # the user's branch and files are as they were
    assert git(repo, "rev-parse", "HEAD") == head
    assert (repo / "model.py").read_text() == model_before


async def test_apply_without_a_run_says_so(client: LanguageClient, repo: Path):
    result = await client.workspace_execute_command_async(_command("apply", workspace=str(repo)))
    assert result["status"] == "error"
    assert "no run recorded" in result["summary"]
    assert git(repo, "branch", "--list", "infrarsi/*") == ""


async def test_report_before_any_run_is_null(client: LanguageClient, repo: Path):
    assert await client.workspace_execute_command_async(_command("report", workspace=str(repo))) is None


def _kinds(client: LanguageClient) -> list[str]:
    return [report.kind for reports in client.progress_reports.values() for report in reports]


@pytest.mark.e2e
async def test_optimize_with_a_tiny_budget_reports_progress(client: LanguageClient, repo: Path):
    result = await asyncio.wait_for(client.workspace_execute_command_async(
        _command("optimize", workspace=str(repo), goal="faster step time", trials=2, repeats=2)), timeout=600)
    assert result["status"] in ("ok", "no_promotion"), result
    assert result["run_id"] and result["trials"] >= 2
    assert len(client.progress_reports) == 1, "one server-created progress for the command"
    [reports] = client.progress_reports.values()
    assert reports[0].kind == "begin" and reports[0].title == "InfraRSI: optimize"
    assert reports[-1].kind == "end" and reports[-1].message == result["summary"]
    messages = [r.message for r in reports if r.kind == "report"]
    assert any(m.startswith("doctor: baseline run 1 of 2") for m in messages)
    assert sum(re.match(r"trial \d+ of 2, \d+ (s|min)", m) is not None for m in messages) >= 2, "a report per trial"
    assert (repo / ".infrarsi" / "run.json").exists() and (repo / ".infrarsi" / "doctor.json").exists()
    assert any("goal: faster step time" in m.message for m in client.log_messages)

    # the editor now shows what was measured: the lens has the baseline, the site the run's verdict
    train = repo / "train.py"
    uri = open_file(client, train)
    [lens] = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert lens.command.title.startswith("InfraRSI: baseline ") and "ms/step" in lens.command.title
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line_of(train.read_text(), '"--micro_batch_size"'), character=25)))
    assert "prior micro_batch_size=8: step time" in hover.contents.value
    model_uri = open_file(client, repo / "model.py")
    [sdpa] = [d for d in await diagnostics_for(client, model_uri) if d.code == "sdpa_attention"]
    assert result["run_id"] in sdpa.message and "not yet verified" not in sdpa.message


def _trial_processes(server_pid: int) -> list[psutil.Process]:
    """The server's descendants that run a trial (the training script under python)."""
    try:
        children = psutil.Process(server_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for child in children:
        try:
            if "train.py" in " ".join(child.cmdline()):
                out.append(child)
        except psutil.Error:
            continue
    return out


@pytest.mark.e2e
@pytest.mark.parametrize("how", ["cancel-request", "progress-cancel"])
async def test_cancel_kills_the_running_trial_and_answers_cancelled(client: LanguageClient, repo: Path, how: str):
    token = f"test-{how}"
    client.progress_reports.setdefault(token, [])  # the client's own token: it announced it itself
    msg_id = f"doctor-{how}"
    request = asyncio.wrap_future(client.protocol.send_request(
        types.WORKSPACE_EXECUTE_COMMAND, _command("doctor", workspace=str(repo), repeats=3, workDoneToken=token),
        msg_id=msg_id))
    server_pid = client._server.pid
    trial = await until(lambda: _trial_processes(server_pid), timeout=120, what="a running trial")
    if how == "cancel-request":
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
    else:
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    with pytest.raises(JsonRpcRequestCancelled):
        await asyncio.wait_for(request, timeout=60)
    # by the time the answer comes, the trial's process tree is gone
    assert not [p for p in trial if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not _trial_processes(server_pid)
    reports = client.progress_reports[token]
    assert reports[0].kind == "begin" and reports[-1].kind == "end" and reports[-1].message == "cancelled"
    assert not (repo / ".infrarsi" / "doctor.json").exists(), "a cancelled doctor writes no report"
