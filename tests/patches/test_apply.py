"""apply_patches and find_sites on a real copy of the dense GPT fixture, and LLM diffs with git apply."""

import difflib
import shutil
import subprocess
from pathlib import Path

import pytest

from infrarsi.contract import Contract, Knob, LossInvariant, MemoryBudget, Scope, Workload, file_sha256
from infrarsi.patches import REGISTRY, apply_patches, find_sites
from infrarsi.patches.diff_patch import DiffError, parse_unified_diff
from infrarsi.project import editable_sources

FIXTURE = Path(__file__).parents[2] / "fixtures" / "dense_gpt"


def _contract(repo: Path, knobs=(), functions=()) -> Contract:
    return Contract(
        workload=Workload(entry="train.py", command=["python", "train.py"], tokens_per_step=4096, seq_len=256,
                          global_batch=16, seed=1337, warmup_steps=1, measured_steps=3, planned_steps=100),
        loss=LossInvariant(compare_steps=3, tolerance=1e-4, numerics_tolerance=1e-3),
        memory=MemoryBudget(budget_bytes=4 << 30),
        scope=Scope(editable=["model.py", "train.py"], functions=list(functions),
                    locked={"data.py": file_sha256(repo / "data.py")}),
        knobs=list(knobs),
    )


@pytest.fixture
def repo(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "repo", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "repo"


def test_find_sites_on_the_fixture(repo):
    contract = _contract(repo)
    sites = find_sites(editable_sources(repo, contract), contract)
    names = {name for name, _ in sites}
    assert "sdpa_attention" in names and "tf32_matmul" in names
    # the fixture already checkpoints and compiles behind its own flags
    assert "activation_checkpointing" not in names and "compile_model" not in names
    sdpa = next(site for name, site in sites if name == "sdpa_attention")
    assert sdpa.path == "model.py"
    assert "att = (q @ k.transpose" in (repo / "model.py").read_text().splitlines()[sdpa.start_line - 1]


def test_apply_in_order_with_outcomes(repo):
    contract = _contract(repo)
    original = (repo / "model.py").read_text()
    outcomes = apply_patches(repo, ["sdpa_attention", "tf32_matmul", "moe_batched_dispatch", "nope"], contract, "cpu")
    status = {o.name: (o.status, o.reason) for o in outcomes}
    assert status["sdpa_attention"] == ("applied", "")
    assert status["tf32_matmul"][0] == "skipped" and "GPU-only" in status["tf32_matmul"][1]
    assert status["moe_batched_dispatch"][0] == "skipped" and "no site" in status["moe_batched_dispatch"][1]
    assert status["nope"][0] == "failed" and "unknown patch" in status["nope"][1]
    sdpa = outcomes[0]
    assert list(sdpa.changed) == ["model.py"]
    assert (repo / "model.py").read_text() == sdpa.changed["model.py"] != original
    assert sdpa.hunks and sdpa.hunks[0].path == "model.py" and sdpa.hunks[0].header.startswith("@@ -")
    assert any(line.startswith("+") and "scaled_dot_product_attention" in line for line in sdpa.hunks[0].text.splitlines())
    # on a GPU the same request applies tf32 to the training script
    tf32 = apply_patches(repo, ["tf32_matmul"], contract, "cuda")[0]
    assert tf32.status == "applied" and list(tf32.changed) == ["train.py"]


def test_existing_knob_wins(repo):
    knob = Knob(name="compile", role="compile", type="bool", default=False, flag="--compile", flag_style="store_true")
    (repo / "train.py").write_text((repo / "train.py").read_text().replace("model = torch.compile(model)", "pass"))
    outcome = apply_patches(repo, ["compile_model"], _contract(repo, knobs=[knob]), "cpu")[0]
    assert outcome.status == "skipped" and "already has a compile knob" in outcome.reason


def test_added_knob_is_reported(repo):
    (repo / "train.py").write_text((repo / "train.py").read_text().replace("model = torch.compile(model)", "pass"))
    outcome = apply_patches(repo, ["compile_model"], _contract(repo), "cpu")[0]
    assert outcome.status == "applied", outcome.reason
    [knob] = outcome.knobs
    assert knob.flag == "--compile_model" and knob.flag_style == "bool_optional" and knob.default is True
    assert knob.render(False) == ["--no-compile_model"]
    line = int(knob.source.split(":")[1])
    assert "--compile_model" in (repo / "train.py").read_text().splitlines()[line - 1]


def test_function_scope_is_enforced(repo):
    contract = _contract(repo, functions=["model.py::GPT.forward"])
    outcome = apply_patches(repo, ["sdpa_attention"], contract, "cpu")[0]
    assert outcome.status == "failed" and outcome.reason.startswith("contract:") and outcome.breaks_contract
    assert (repo / "model.py").read_text() == (FIXTURE / "model.py").read_text()
    allowed = _contract(repo, functions=["model.py::CausalSelfAttention.forward"])
    assert apply_patches(repo, ["sdpa_attention"], allowed, "cpu")[0].status == "applied"


# --- LLM diffs ---------------------------------------------------------------------------------


def _diff(repo: Path, rel: str, old: str, new: str) -> str:
    before = (repo / rel).read_text()
    assert old in before
    after = before.replace(old, new, 1)
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{rel}", f"b/{rel}"))


def _store(repo: Path, ident: str, text: str) -> None:
    folder = repo / ".infrarsi" / "patches"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{ident}.diff").write_text(text)


def test_llm_diff_applies_without_git(repo):
    _store(repo, "wd", _diff(repo, "train.py", '"--weight_decay", type=float, default=0.1', '"--weight_decay", type=float, default=0.05'))
    outcome = apply_patches(repo, ["llm:wd"], _contract(repo), "cpu")[0]
    assert outcome.status == "applied", outcome.reason
    assert "default=0.05" in (repo / "train.py").read_text() and list(outcome.changed) == ["train.py"]
    assert outcome.hunks


def test_llm_diff_applies_in_a_copy_nested_inside_a_checkout(tmp_path, repo):
    """Inside another repository git apply would silently skip the paths: the ceiling stops that."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    _store(repo, "wd", _diff(repo, "train.py", '"--weight_decay", type=float, default=0.1', '"--weight_decay", type=float, default=0.05'))
    outcome = apply_patches(repo, ["llm:wd"], _contract(repo), "cpu")[0]
    assert outcome.status == "applied", outcome.reason
    assert "default=0.05" in (repo / "train.py").read_text()


@pytest.mark.parametrize(
    "rel,old,new,reason",
    [
        ("data.py", "noise=0.1", "noise=0.0", "contract: touches locked file data.py"),
        ("train.py", "probe.step(loss=loss_sum", "probe.step(loss=loss_sum * 0", "contract: changes the probe calls"),
    ],
)
def test_llm_diff_refused_by_contract(repo, rel, old, new, reason):
    before = (repo / rel).read_text()
    _store(repo, "bad", _diff(repo, rel, old, new))
    outcome = apply_patches(repo, ["llm:bad"], _contract(repo), "cpu")[0]
    assert outcome.status == "failed" and outcome.reason.startswith(reason) and outcome.breaks_contract
    assert (repo / rel).read_text() == before


def test_llm_diff_that_does_not_match_leaves_the_tree_alone(repo):
    text = _diff(repo, "train.py", '"--weight_decay", type=float, default=0.1', '"--weight_decay", type=float, default=0.05')
    (repo / "train.py").write_text((repo / "train.py").read_text().replace("weight_decay", "wd"))
    before = (repo / "train.py").read_text()
    _store(repo, "stale", text)
    outcome = apply_patches(repo, ["llm:stale"], _contract(repo), "cpu")[0]
    assert outcome.status == "failed" and outcome.reason.startswith("does not apply") and not outcome.breaks_contract
    assert (repo / "train.py").read_text() == before


def test_llm_diff_that_breaks_syntax_is_rolled_back(repo):
    _store(repo, "syntax", _diff(repo, "train.py", "args = parser.parse_args()", "args = parser.parse_args("))
    before = (repo / "train.py").read_text()
    outcome = apply_patches(repo, ["llm:syntax"], _contract(repo), "cpu")[0]
    assert outcome.status == "failed" and "does not compile" in outcome.reason and not outcome.breaks_contract
    assert (repo / "train.py").read_text() == before


GOOD = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n"


@pytest.mark.parametrize(
    "text,message",
    [
        (GOOD.replace("@@ -1,2 +1,2 @@", "@@ -1,3 +1,3 @@"), "ends early"),
        (GOOD + " z = 4\n", "longer than its header"),
        (GOOD.replace("a/m.py", "a/../m.py").replace("b/m.py", "b/../m.py"), "not a plain path"),
        (GOOD.replace("--- a/m.py", "--- /dev/null"), "creates or deletes"),
        (GOOD.replace("@@ -1,2 +1,2 @@", "@@ bogus @@"), "bad hunk header"),
        ("just some prose\n", "no file with a hunk"),
    ],
)
def test_malformed_diffs(text, message):
    with pytest.raises(DiffError, match=message):
        parse_unified_diff(text)


def test_well_formed_diff_parses():
    [f] = parse_unified_diff("diff --git a/m.py b/m.py\nindex 1..2 100644\n" + GOOD)
    assert f.path == "m.py" and f.strip == 1 and f.hunks == [[" x = 1", "-y = 2", "+y = 3"]]


def test_registry_order_and_names():
    assert list(REGISTRY)[:2] == ["sdpa_attention", "moe_batched_dispatch"]


_EDIT = '"--weight_decay", type=float, default=0.1', '"--weight_decay", type=float, default=0.05'
_SMUGGLED = {
    "binary patch": "diff --git a/__pycache__/data.cpython-311.pyc b/__pycache__/data.cpython-311.pyc\n"
                    "new file mode 100644\nindex 0000000..1111111\nGIT binary patch\nliteral 4\nLcmZ?wbYNfr0000\n\n"
                    "literal 0\nHcmV?d00001\n\n",
    "symbolic link": "diff --git a/cache b/cache\nnew file mode 120000\n--- /dev/null\n+++ b/cache\n@@ -0,0 +1 @@\n"
                     "+/tmp/cache\n\\ No newline at end of file\n",
    "new file": "diff --git a/helper.py b/helper.py\nnew file mode 100644\n--- /dev/null\n+++ b/helper.py\n"
                "@@ -0,0 +1 @@\n+x = 1\n",
    "file deletion": "diff --git a/data.py b/data.py\ndeleted file mode 100644\n",
    "rename": "diff --git a/data.py b/data2.py\nsimilarity index 100%\nrename from data.py\nrename to data2.py\n",
    "copy": "diff --git a/data.py b/data2.py\nsimilarity index 100%\ncopy from data.py\ncopy to data2.py\n",
    "mode change": "diff --git a/train.py b/train.py\nold mode 100644\nnew mode 100755\n",
}


@pytest.mark.parametrize("kind", _SMUGGLED, ids=list(_SMUGGLED))
def test_llm_diff_with_a_smuggled_extended_header_is_refused_by_name(repo, kind):
    """A legitimate hunk plus one of git's extended headers: git apply would act on the header
    (the parser once read it as commentary); now the diff is refused, naming what it carries."""
    edit = _diff(repo, "train.py", *_EDIT)
    _store(repo, "smuggle", _SMUGGLED[kind] + edit)
    listing = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*"))
    outcome = apply_patches(repo, ["llm:smuggle"], _contract(repo), "cpu")[0]
    assert outcome.status == "failed" and outcome.reason.startswith(f"contract: {kind}: the diff carries"), outcome.reason
    assert outcome.breaks_contract
    assert sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*")) == listing
    assert "default=0.1" in (repo / "train.py").read_text()


def test_only_the_parsed_hunks_reach_git_apply(repo):
    """Commentary around the diff is read past, and never reaches git: the hunks are re-serialized."""
    edit = _diff(repo, "train.py", *_EDIT)
    _store(repo, "prose", "Here is the patch.\n" + edit + "\nThat is all; it keeps the numerics.\n")
    outcome = apply_patches(repo, ["llm:prose"], _contract(repo), "cpu")[0]
    assert outcome.status == "applied", outcome.reason
    assert list(outcome.changed) == ["train.py"]


def test_llm_diff_stored_under_an_id_it_no_longer_hashes_to_is_refused(repo):
    from infrarsi.patches.diff_patch import diff_id

    text = _diff(repo, "train.py", *_EDIT)
    ident = diff_id(text)
    _store(repo, ident, text.replace("0.05", "0.07"))
    outcome = apply_patches(repo, [f"llm:{ident}"], _contract(repo), "cpu")[0]
    assert outcome.status == "failed" and "changed after it was proposed" in outcome.reason and outcome.breaks_contract
