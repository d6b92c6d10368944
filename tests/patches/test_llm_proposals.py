"""LLM-proposed patches: the real ``anthropic`` client against the loopback Messages API server,
on a copy of fixtures/dense_gpt whose contract comes from the real ``init`` (train.py and
model.py editable, data.py locked). The diffs the server serves are in tests/test_data/llm/.
The e2e test validates accepted diffs with real trials through the run stage's own
``validate_patches`` (infrarsi/experiment/search_loop.py)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from infrarsi.contract import Contract, load_contract
from infrarsi.experiment.search_loop import validate_patches
from infrarsi.experiment.session import TrialSession
from infrarsi.experiment.store import TrialStore
from infrarsi.llm import LLMConfig, load_llm_config
from infrarsi.patches import apply_patches
from infrarsi.patches.llm_proposals import TOOL_NAME, diff_id, propose_patches
from infrarsi.project import Project, editable_sources
from infrarsi.records import DoctorReport
from infrarsi.records.files import patch_dir, proposals_path
from infrarsi.stages.init import init
from infrarsi.stages.run import _applicable_patches
from infrarsi.trials import Candidate
from tests.support.doctor_report import doctor_report
from tests.support.messages_server import MessagesServer, malformed_reply, text_reply, tool_use_reply

FIXTURE = Path(__file__).parents[2] / "fixtures" / "dense_gpt"
DATA = Path(__file__).parents[1] / "test_data" / "llm"
# A tiny configuration of the fixture so that a trial takes seconds: 8 sequences of 64 tokens.
SMALL = {"n_layer": 2, "n_head": 4, "n_embd": 64, "vocab_size": 256, "block_size": 64, "batch_size": 8}


@pytest.fixture(scope="module")
def initialized(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("llm") / "dense_gpt"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("__pycache__", ".infrarsi"))
    result = init(repo)
    assert result.status == "ok", result.message
    scope = result.contract.scope
    assert sorted(scope.editable) == ["model.py", "train.py"] and list(scope.locked) == ["data.py"]
    return repo


@pytest.fixture
def repo(initialized, tmp_path) -> Path:
    # copied after init, so the locked file still hashes as the contract says
    return Path(shutil.copytree(initialized, tmp_path / "dense_gpt"))


@pytest.fixture
def server():
    with MessagesServer() as s:
        yield s


def config(server) -> LLMConfig:
    return LLMConfig(api_key="sk-test", model="claude-test", base_url=server.url, timeout_s=10.0, max_retries=0)


def diff(name: str) -> str:
    return (DATA / f"{name}.diff").read_text()


def entry(name: str, text: str | None = None) -> dict:
    return {"title": name.replace("_", " "), "rationale": "measured nothing yet; a guess", "diff": text or diff(name)}


def reply(*entries: dict):
    return tool_use_reply(TOOL_NAME, {"patches": list(entries)})


def project(repo: Path, contract: Contract, llm: LLMConfig | None = None,
            doctor: DoctorReport | None = None) -> Project:
    """The run's view of ``repo``: ``llm`` or the model configuration the environment gives now,
    ``doctor`` or the test data's report."""
    return Project(repo=repo, contract=contract, doctor=doctor or doctor_report(),
                   llm=llm or load_llm_config(repo), sources=editable_sources(repo, contract))


def test_a_good_diff_is_accepted_stored_and_applies(repo, server, tmp_path):
    contract = load_contract(repo)
    before = (repo / "model.py").read_text()
    server.script(reply(entry("good_mlp_rewrite")))
    measured = doctor_report(findings=["forward 41% of the step"])
    doctor = replace(measured, losses=replace(measured.losses, reference=[6.93817, 6.81244], tolerance=2.5e-6),
                     reorder=replace(measured.reorder, knobs={"micro_batch_size": 2}, max_deviation=1.7e-7))
    result = propose_patches(project(repo, contract, config(server), doctor), "faster on this CPU")

    assert result.status == "ok" and result.rejected == [], result
    (patch,) = result.patches
    assert patch.id == diff_id(diff("good_mlp_rewrite")) and result.names == [f"llm:{patch.id}"]
    assert patch.path == patch_dir(repo) / f"{patch.id}.diff" and patch.path.read_text() == diff("good_mlp_rewrite")
    assert (repo / "model.py").read_text() == before  # checked on a scratch copy, never in the user's tree

    (request,) = server.requests
    body = request.body
    assert body["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
    assert [t["name"] for t in body["tools"]] == [TOOL_NAME]
    text = body["messages"][0]["content"]
    assert "faster on this CPU" in text and "forward 41% of the step" in text and "class MLP" in text
    assert "Locked files (never touch): data.py" in text and "2048 tokens per optimizer step" in text
    # the per-run records stay out of the prompt (the noise's count of runs is in it)
    assert '"runs": [' not in text and '"step_times"' not in text and '"noise": {"runs": 3' in text
    # the reference losses the loss check compares with never reach the model
    assert "6.93817" not in text and "6.81244" not in text and '"losses"' not in text and "1.7e-07" not in text

    # the stored name is what a trial's work tree applies
    work = Path(shutil.copytree(repo, tmp_path / "work", ignore=shutil.ignore_patterns(".infrarsi")))
    (outcome,) = apply_patches(work, result.names, contract, "cpu", diff_dir=patch_dir(repo))
    assert outcome.status == "applied", outcome.reason
    assert "return self.c_proj(self.gelu(self.c_fc(x)))" in (work / "model.py").read_text()


def test_locked_file_loss_line_and_stale_diffs_are_refused_before_any_trial(repo, server):
    contract = load_contract(repo)
    stale = diff("good_mlp_rewrite").replace("        x = self.gelu(x)\n", "        x = self.act(x)\n")
    server.script(reply(entry("edit_locked_data"), entry("edit_loss_line"), entry("stale", stale),
                        entry("not_a_diff", "make the model faster by using fewer layers")))
    result = propose_patches(project(repo, contract, config(server)), "faster")

    assert result.status == "ok" and result.patches == []
    got = {r.title: (r.status, r.reason) for r in result.rejected}
    assert got["edit locked data"] == ("contract", "contract: touches locked file data.py")
    assert got["edit loss line"][0] == "contract"
    assert got["edit loss line"][1].startswith("contract: changes the loss computation in train.py")
    assert got["stale"][0] == "crash" and got["stale"][1].startswith("does not apply")
    assert got["not a diff"] == ("crash", "malformed diff: no file with a hunk in the diff")
    assert not list(patch_dir(repo).glob("*.diff"))


@pytest.mark.parametrize("served", [
    text_reply("Here are three ideas: use SDPA, fuse AdamW, compile the model."),
    tool_use_reply(TOOL_NAME, {"patches": "use SDPA"}),
    tool_use_reply(TOOL_NAME, {"patches": [{"title": "sdpa", "rationale": "faster"}]}),
    tool_use_reply("record_priors", {"patches": []}),
    malformed_reply(),
], ids=["prose", "patches-not-a-list", "entry-without-diff", "other-tool", "body-not-json"])
def test_a_malformed_reply_is_an_error_and_stores_nothing(repo, server, served):
    server.script(served)
    result = propose_patches(project(repo, load_contract(repo), config(server)), "faster")
    assert result.status == "error" and result.reason == "malformed", result
    assert result.patches == [] and result.rejected == []
    assert not patch_dir(repo).exists()
    assert len(server.requests) == 1


def test_without_a_key_nothing_is_sent(repo, server):
    result = propose_patches(project(repo, load_contract(repo), LLMConfig(base_url=server.url)), "faster")
    assert (result.status, result.reason) == ("error", "not_configured")
    assert server.requests == [] and not patch_dir(repo).exists()


def test_the_run_stage_gathers_proposals_once_and_lists_refusals(repo, server, monkeypatch, tmp_path):
    contract = load_contract(repo)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user config file
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "INFRARSI_ANTHROPIC_MODEL"):
        monkeypatch.delenv(name, raising=False)
    library, library_checks = _applicable_patches(project(repo, contract))
    assert server.requests == [] and not any(n.startswith("llm:") for n in library)

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("INFRARSI_ANTHROPIC_MODEL", "claude-test")
    monkeypatch.setenv("INFRARSI_LLM_MAX_RETRIES", "0")
    server.script(reply(entry("good_mlp_rewrite"), entry("edit_locked_data")))
    good, locked = diff_id(diff("good_mlp_rewrite")), diff_id(diff("edit_locked_data"))
    names, checks = _applicable_patches(project(repo, contract), goal="faster")
    assert names == [*library, f"llm:{good}"]
    refused = [c for c in checks if c.name == f"llm:{locked}"]
    assert [(c.status, c.cost_s) for c in refused] == [("contract", 0.0)]
    assert refused[0].reason == "edit locked data: contract: touches locked file data.py"
    cache = json.loads(proposals_path(repo).read_text())
    assert [p["id"] for p in cache["patches"]] == [good] and cache["goal"] == "faster"

    # running again asks nothing: same names, same refusals, one request in all
    assert _applicable_patches(project(repo, contract), goal="faster") == (names, checks)
    assert len(server.requests) == 1

    # another goal is another question; the server has no reply left (500), which the report shows
    names, checks = _applicable_patches(project(repo, contract), goal="less memory")
    assert len(server.requests) == 2 and names == library
    (failed,) = [c for c in checks if c.name == "llm"]
    assert failed.status == "skipped" and "HTTP 500" in failed.reason
    assert [c for c in checks if c.name != "llm"] == library_checks


@pytest.mark.e2e
def test_a_locked_file_edit_and_a_batch_shrink_are_rejected_and_never_searched(repo, server, tmp_path):
    """One served reply with four diffs. The edit of the locked data.py is refused statically;
    the other three pass the static checks and get one validation trial each: halving the batch
    ends ``contract`` (tokens per step), scaling the activations into the head ends ``numerics``
    (loss off the reference). Only the equivalent rewrite reaches the search space."""
    contract = load_contract(repo)
    w = contract.workload
    w.args = {**w.args, **SMALL}
    w.tokens_per_step, w.seq_len, w.global_batch = 8 * 64, 64, 8
    w.warmup_steps, w.measured_steps = 1, 3
    contract.loss.compare_steps = 4

    server.script(reply(entry("good_mlp_rewrite"), entry("edit_locked_data"), entry("shrink_batch"),
                        entry("scale_logits")))
    proposals = propose_patches(project(repo, contract, config(server)), "faster")
    assert proposals.status == "ok", proposals.message
    assert [(r.title, r.status) for r in proposals.rejected] == [("edit locked data", "contract")]
    good, shrink, scaled = proposals.names

    store = TrialStore.open(contract, proposals.names, storage_url=f"sqlite:///{tmp_path / 'study.db'}")
    session = TrialSession(repo, contract, store)
    baseline = Candidate(knobs={**{k.name: k.default for k in contract.tunable}, "threads": 1})
    base = session.execute(baseline, "baseline", reason="baseline")
    assert base.ok and len(base.losses) == 4, base.detail
    contract.loss.reference = list(base.losses)  # the session judges with this same contract

    checks = validate_patches(session, base, proposals.names)
    got = {c.name: c for c in checks}
    print({n: (c.status, round(c.cost_s, 1), c.reason[:100]) for n, c in got.items()})
    assert got[good].status == "validated", got[good].reason
    assert got[shrink].status == "contract" and "reported 256 tokens" in got[shrink].reason
    assert got[scaled].status == "numerics" and "off the reference" in got[scaled].reason
    assert all(c.cost_s > 0 for c in checks)
    assert [c.name for c in checks if c.status == "validated"] == [good]  # the search space's patches

    # recorded once: validating again reruns nothing (a trial the machine disturbed was rerun at once,
    # so there may be more than three)
    validations = len(store.trials(("validation",)))
    assert validations >= 3
    assert [(c.name, c.status) for c in validate_patches(session, base, proposals.names)] == \
        [(c.name, c.status) for c in checks]
    assert len(store.trials(("validation",))) == validations
