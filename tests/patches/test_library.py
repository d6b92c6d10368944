"""Before/after examples for every patch (tests/test_data/patches/<patch>/), Fixit style.

``<case>.before.py`` must become ``<case>.after.py`` exactly, with a site in the editor's range
format; ``<case>.unchanged.py`` is a place the patch must not apply. A patched file must not be
patched again.
"""

from pathlib import Path

import pytest

from infrarsi.patches import REGISTRY

DATA = Path(__file__).parents[1] / "test_data" / "patches"


def _cases(suffix):
    return [
        pytest.param(name, path, id=f"{name}/{path.name.removesuffix(suffix)}")
        for name in REGISTRY
        for path in sorted((DATA / name).glob(f"*{suffix}"))
    ]


def test_every_patch_has_examples_both_ways():
    for name in REGISTRY:
        assert list((DATA / name).glob("*.before.py")), f"{name} has no before/after example"
        assert list((DATA / name).glob("*.unchanged.py")), f"{name} has no must-not-apply example"


@pytest.mark.parametrize("name,before", _cases(".before.py"))
def test_rewrites(name, before):
    patch = REGISTRY[name]
    after = before.with_name(before.name.replace(".before.py", ".after.py")).read_text()
    source = before.read_text()
    assert patch.rewrite(source) == after
    sites = patch.sites(before.name, source)
    assert sites
    lines = source.splitlines()
    for site in sites:
        assert site.path == before.name and site.message
        assert 1 <= site.start_line <= site.end_line <= len(lines)
        assert 0 <= site.start_col <= len(lines[site.start_line - 1])
    compile(after, before.name, "exec")
    assert patch.rewrite(after) is None, "a patched file must not be patched again"


@pytest.mark.parametrize("name,path", _cases(".unchanged.py"))
def test_does_not_apply(name, path):
    patch = REGISTRY[name]
    assert patch.rewrite(path.read_text()) is None
    assert patch.sites(path.name, path.read_text()) == []


def test_declarations():
    for name, patch in REGISTRY.items():
        assert patch.name == name and patch.DESCRIPTION
        assert (Path(__file__).parents[2] / "infrarsi" / "patches" / f"{name}.py").is_file()
        assert set(patch.prior) == {"cpu", "cuda"}
        assert (patch.gate_knob is None) == (patch.gate_role is None)
    assert REGISTRY["tf32_matmul"].numerics_by_design and REGISTRY["tf32_matmul"].gpu_only
    assert REGISTRY["pinned_memory"].gpu_only


def test_mask_must_be_provably_causal():
    """The same attention applies with diagonal=1 and not with diagonal=0 (the diagonal hidden too)."""
    source = (DATA / "sdpa_attention" / "diagonal_masked.unchanged.py").read_text()
    assert REGISTRY["sdpa_attention"].rewrite(source.replace("diagonal=0", "diagonal=1")) is not None


def test_unparseable_source_has_no_sites_and_rewrite_raises():
    from infrarsi.patches.base import PatchError

    patch = REGISTRY["sdpa_attention"]
    assert patch.sites("bad.py", "def (softmax masked_fill:\n") == []
    with pytest.raises(PatchError):
        patch.rewrite("def (softmax masked_fill:\n")
