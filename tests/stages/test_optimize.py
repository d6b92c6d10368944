"""optimize: the whole job from a goal, each stage run as the repo's state needs it."""

from __future__ import annotations

import git
import pytest

from infrarsi.cli import main
from infrarsi.contract import load_contract
from infrarsi.records import load_run
from infrarsi.stages.optimize import optimize
from tests.stages.conftest import budget_kinds, fresh_paced, git_state, tree_digest


@pytest.mark.e2e
def test_optimize_from_a_fresh_repo_to_a_commit(tmp_path):
    repo = fresh_paced(tmp_path / "paced")
    head = git.Repo(repo).head.commit.hexsha
    result = optimize(repo, "faster, at most 8 trials", do_apply=True, doctor_repeats=2)
    assert result.status == "ok", result.message
    assert result.stages == ["init", "doctor", "run", "report", "apply"]
    assert result.goal.trials == 8 and result.goal.understood_by == "rules"
    # The goal's budget is the run's: 8 trials counting the baseline, verification on top (fewer
    # when the search finds nothing left worth a trial).
    kinds = budget_kinds(result.run.trials)
    spent = kinds.count("baseline") + kinds.count("search")
    assert spent == 8 or (spent < 8 and result.run.search_ended.startswith("converged")), result.run.search_ended
    assert result.run.promoted is not None and result.run.promoted.job_speedup[1] > result.run.noise_floor
    assert load_run(repo).run_id == result.run.run_id
    assert result.report.status == "ok" and (repo / ".infrarsi" / "report.html").is_file()
    assert (repo / ".infrarsi" / "report.md").is_file()
    assert result.apply.status == "committed" and result.apply.branch == f"infrarsi/{result.run.run_id}"
    g = git.Repo(repo)
    assert g.head.commit.hexsha == head and result.apply.branch in [h.name for h in g.heads]
    assert g.commit(result.apply.branch).parents[0].hexsha == load_contract(repo).base_commit == head
    assert result.apply.message in result.message


def test_an_unreadable_goal_is_a_clear_error_and_writes_nothing(tmp_path, capsys):
    repo = fresh_paced(tmp_path / "paced")
    before_tree, before_git = tree_digest(repo), git_state(repo)
    result = optimize(repo, "bake me a cake")
    assert result.status == "error" and result.stages == [] and result.run is None
    assert "bake me a cake" in result.message and '"faster"' in result.message and "at most 30 trials" in result.message
    assert main(["optimize", str(repo), "bake me a cake"]) == 1
    assert "Try one of" in capsys.readouterr().err
    assert not (repo / ".infrarsi").exists()
    assert tree_digest(repo) == before_tree and git_state(repo) == before_git


def test_no_bank_neither_reads_nor_writes_the_experience_bank(prepared, capsys):
    import json
    import os

    from infrarsi.bank import EffectFinding, ExperienceBank, WorkloadSignature

    url = os.environ["INFRARSI_BANK_URL"]  # this test's own bank (tests/conftest.py)
    with ExperienceBank(url) as bank:
        planted = bank.record_run(
            signature=WorkloadSignature.from_contract(load_contract(prepared), {}), hardware_id="any", hardware="any",
            effects=[EffectFinding(key="threads=2", role="threads", value=2, baseline=1, time_log=2.48, time_sd=0.01)])
    assert main(["optimize", str(prepared), "faster, at most 3 trials", "--no-bank", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stages"] == ["run", "report"] and "experience bank" not in out["run"]["priors_source"]
    assert out["run"]["bank_priors"] == []
    with ExperienceBank(url) as bank:
        assert [r.id for r in bank.runs()] == [planted]


def test_the_model_configuration_is_read_once_and_its_warnings_said_once(prepared):
    (prepared / ".infrarsi" / "config.toml").write_text("[anthropic]\ntimeout_s = -1\n")
    said: list[str] = []
    result = optimize(prepared, "faster, at most 2 trials", use_bank=False, on_event=lambda e: said.append(e.message))
    assert result.status in ("ok", "no_promotion"), result.message
    assert sum("timeout_s=-1" in m for m in said) == 1, [m for m in said if "warning" in m]
