"""bench/expert.py's grid: every point names moves its repo defines, and a point becomes the copy,
contract and candidate the bench measures (flags through the contract's knobs, hand edits made in
the point's own copy, an edit that does not apply once refused). Static: nothing is trained."""

from __future__ import annotations

import ast
import shutil
import tomllib

import pytest

from bench.expert import DEFAULT_CORPUS, FIXTURES, GRIDS, make_arm
from infrarsi.contract import load_contract
from infrarsi.stages.init import init
from infrarsi.trials import Candidate
from tests.stages.conftest import git_repo


def test_every_point_is_made_of_moves_its_repo_defines():
    grids = tomllib.loads(GRIDS.read_text())
    assert {"mnist", "vae", "dcgan", "llmc_gpt2", "hf_run_clm", "dense_gpt", "moe_gpt", "ddp_gpt"} <= set(grids)
    for name, grid in grids.items():
        assert grid["points"], name
        for point in grid["points"]:
            assert set(point) <= set(grid["moves"]), (name, point)
        if (FIXTURES / name).is_dir():
            assert grid["command"], name


@pytest.mark.parametrize("name", sorted(tomllib.loads(GRIDS.read_text())))
def test_every_hand_edit_applies_once_and_leaves_python(name):
    """Each move's edits, made in order on the repo's own files (the fixture's, or the corpus
    entry's where ../shared/corpus is present), each match once and leave files that parse."""
    root = FIXTURES / name if (FIXTURES / name).is_dir() else DEFAULT_CORPUS / name
    if not root.is_dir():
        pytest.skip(f"{root} is not here")
    for move, spec in tomllib.loads(GRIDS.read_text())[name]["moves"].items():
        texts: dict[str, str] = {}
        for edit in spec.get("edits") or []:
            text = texts.get(edit["file"]) or (root / edit["file"]).read_text()
            assert text.count(edit["old"]) == 1, (name, move, edit["old"])
            texts[edit["file"]] = text.replace(edit["old"], edit["new"])
        for file, text in texts.items():
            ast.parse(text, f"{name}/{file} after {move}")


def test_a_point_is_its_own_copy_contract_and_candidate(tmp_path):
    repo = tmp_path / "dense_gpt"
    shutil.copytree(FIXTURES / "dense_gpt", repo)
    git_repo(repo)
    assert init(repo, budget_bytes=2**30).status == "ok"
    contract = load_contract(repo)
    baseline = Candidate(knobs={k.name: k.default for k in contract.tunable})
    grid = tomllib.loads(GRIDS.read_text())["dense_gpt"]

    arm = make_arm("micro16+sdpa", [grid["moves"]["micro16"], grid["moves"]["sdpa"],
                                    {"env": {"MY_VAR": "1"}}], repo, contract, baseline, tmp_path / "arms")
    assert arm.candidate.knobs["micro_batch_size"] == 16
    assert {k: v for k, v in arm.candidate.knobs.items() if k != "micro_batch_size"} == {
        k: v for k, v in baseline.knobs.items() if k != "micro_batch_size"}
    model = (arm.repo / "model.py").read_text()
    assert "F.scaled_dot_product_attention(q, k, v, is_causal=True)" in model and "masked_fill" not in model
    assert "masked_fill" in (repo / "model.py").read_text()  # the repo itself is untouched
    assert arm.contract.workload.env["MY_VAR"] == "1" and "MY_VAR" not in contract.workload.env

    with pytest.raises(ValueError, match="occurs 0 times"):
        make_arm("again", [{"edits": [{"file": "model.py", "old": "no such line", "new": ""}]}], repo, contract,
                 baseline, tmp_path / "arms")
