"""Loading a contract edited by hand and re-hashed: every field's type, and every path inside the repo;
the owner's policy tables, edited by hand without a hash."""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import replace

import pytest
import tomli_w

from infrarsi.contract import (
    POLICY_TABLES,
    Contract,
    ContractError,
    Knob,
    LossInvariant,
    MemoryBudget,
    Scope,
    VerifyPolicy,
    Workload,
    contract_path,
    load_contract,
    save_contract,
)


def contract() -> Contract:
    return Contract(
        workload=Workload(entry="train.py", command=["python", "train.py"], tokens_per_step=32, seq_len=8,
                          global_batch=4, seed=0, warmup_steps=1, measured_steps=2, planned_steps=100),
        loss=LossInvariant(compare_steps=2, tolerance=1e-3, numerics_tolerance=1e-2),
        memory=MemoryBudget(budget_bytes=2**30),
        scope=Scope(editable=["train.py"], functions=["train.py::step"], locked={"data.py": "0" * 64}),
        knobs=[Knob(name="batch_size", role="micro_batch", type="int", default=8, flag="--batch_size",
                    domain=[4, 8], tunable=True)],
    )


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    save_contract(contract(), repo)
    return repo


def edit(repo, change) -> None:
    """Change the saved contract's data and write it back with a matching hash, as a determined
    hand-editor would (the hash is sha256 over the canonical JSON of the fields init wrote)."""
    path = contract_path(repo)
    data = tomllib.loads(path.read_text())
    data.pop("hash")
    change(data)
    written = {k: v for k, v in data.items() if k not in POLICY_TABLES}
    blob = json.dumps(written, sort_keys=True, separators=(",", ":")).encode()
    path.write_text(tomli_w.dumps({"hash": "sha256:" + hashlib.sha256(blob).hexdigest(), **data}))


def test_the_saved_contract_loads(repo):
    assert load_contract(repo) == contract()


CASES = {
    "knobs[0].default": lambda d: d["knobs"][0].update(default="eight"),
    "knobs[0].tunable": lambda d: d["knobs"][0].update(tunable="yes"),
    "knobs[0].domain": lambda d: d["knobs"][0].update(domain=[4, "8"]),
    "knobs[0].flag": lambda d: d["knobs"][0].update(flag=3),
    "workload.command": lambda d: d["workload"].update(command=[1, 2]),
    "workload.args": lambda d: d["workload"].update(args={"steps": [1]}),
    "scope.editable": lambda d: d["scope"].update(editable=["../../etc/x.py"]),
    "workload.entry": lambda d: d["workload"].update(entry="/etc/passwd"),
    "workload.cwd": lambda d: d["workload"].update(cwd="../elsewhere"),
    "scope.locked": lambda d: d["scope"].update(locked={"../secrets.py": "0" * 64}),
    "scope.functions": lambda d: d["scope"].update(functions=["../x.py::f"]),
    "loss.reference": lambda d: d["loss"].update(reference=[1.0, "2"]),
    "base_commit": lambda d: d.update(base_commit=7),
    "sandbox.network": lambda d: d.update(sandbox={"network": "yes"}),
    "workload.env": lambda d: d["workload"].update(env={"X": 1}),
    "workload.hidden": lambda d: d["workload"].update(hidden=-4096),
    "workload.layers": lambda d: d["workload"].update(layers=-32),
    "workload.heads": lambda d: d["workload"].update(heads="32"),
    "sandbox.read_only": lambda d: d.update(sandbox={"read_only": ["data"]}),
    "verify.candidates": lambda d: d.update(verify={"candidates": 0}),
    "verify.least_rounds": lambda d: d.update(verify={"least_rounds": 4, "most_rounds": 3}),
    "verify.rounds": lambda d: d.update(verify={"rounds": 3}),
}


@pytest.mark.parametrize("field", sorted(CASES))
def test_a_wrong_field_is_refused_by_name(repo, field):
    edit(repo, CASES[field])
    with pytest.raises(ContractError) as refused:
        load_contract(repo)
    assert f"contract field '{field}'" in str(refused.value), str(refused.value)


def test_a_link_out_of_the_repo_is_not_inside_it(repo, tmp_path):
    (repo / "escape").symlink_to(tmp_path)
    edit(repo, lambda d: d["scope"].update(editable=["escape/x.py"]))
    with pytest.raises(ContractError, match="scope.editable"):
        load_contract(repo)


POLICIES = """
[sandbox]
network = true
read_only = ["/data"]

[verify]
candidates = 2
most_rounds = 4
"""


def test_the_owners_tables_are_written_by_hand_and_stay_out_of_the_hash(repo):
    path = contract_path(repo)
    path.write_text(path.read_text() + POLICIES)
    loaded = load_contract(repo)
    assert loaded.sandbox_policy.network and loaded.sandbox_policy.read_only == ["/data"]
    assert loaded.verify_policy == VerifyPolicy(candidates=2, least_rounds=2, most_rounds=4)
    assert contract().verify_policy == VerifyPolicy() and loaded.digest() == contract().digest()
    # A field init wrote, edited the same way, is still refused.
    path.write_text(path.read_text().replace("planned_steps = 100", "planned_steps = 10"))
    with pytest.raises(ContractError, match="hash.*only \\[sandbox\\] and \\[verify\\] are yours"):
        load_contract(repo)


def test_a_contract_an_earlier_infrarsi_wrote_loads(repo):
    # Written before `workload.notes` existed: not in the file, the hash over what the file holds.
    edit(repo, lambda d: d["workload"].pop("notes"))
    assert "notes" not in contract_path(repo).read_text()
    assert load_contract(repo) == contract()


def test_a_knobs_source_is_read_in_one_place():
    knob = Knob(name="lr", role="workload", type="float", default=0.1, source="conf/train.py:12")
    assert (knob.source_path, knob.source_line) == ("conf/train.py", 12)
    assert (replace(knob, source="").source_path, replace(knob, source="").source_line) == ("", 0)
    assert (replace(knob, source="c:/x.py:3").source_path, replace(knob, source="train.py").source_line) == ("c:/x.py", 0)
