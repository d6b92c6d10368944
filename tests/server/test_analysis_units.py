"""Analysis by unit finds exactly the sites of the patches' whole-file runs, and reuses what did not change."""

from __future__ import annotations

from pathlib import Path

import pytest

from infrarsi.patches import REGISTRY, PatchError
from infrarsi_server import analysis_units, worker
from infrarsi_server.analysis import _map, patch_names, plan_units

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
ACCUMULATION = "tests/test_data/patches/gradient_accumulation"
FILES = ["fixtures/dense_gpt/model.py", "fixtures/dense_gpt/train.py", "fixtures/moe_gpt/model.py",
         "fixtures/ddp_gpt/train.py", f"{ACCUMULATION}/runnable.py", f"{ACCUMULATION}/loop.before.py"]
"""Relative to the repo root; the last two hold a loop to accumulate in, at top level and in a function."""


def _whole_file(rel: str, text: str) -> dict[str, list]:
    found = {}
    for name, patch in REGISTRY.items():
        try:
            sites = patch.transform(rel, text).sites
        except PatchError:
            continue
        if sites:
            found[name] = sorted(sites, key=lambda s: (s.start_line, s.start_col))
    return found


def _by_units(rel: str, text: str) -> dict[str, list]:
    # GPU-only patches too: their sites must match as well, whatever this machine is
    gpu = [n for n, p in REGISTRY.items() if p.gpu_only and not any(a in text for a in p.absent) and p.may_apply(text)]
    names = patch_names(rel, text, None) + gpu
    plan = plan_units(text, analysis_units.cut(text), names)
    found: dict[str, list] = {}
    for (unit, _), result in zip(plan, worker.analyse(rel, [(u.text, n, not u.whole) for u, n in plan]), strict=True):
        for name, sites in result.sites.items():
            found.setdefault(name, []).extend(_map(s, unit.lines) for s in sites)
    return {n: sorted(set(s), key=lambda s: (s.start_line, s.start_col)) for n, s in found.items()}


@pytest.mark.parametrize("rel", FILES)
def test_units_find_the_whole_file_sites(rel: str):
    text = (ROOT / rel).read_text()
    expected = _whole_file(rel, text)
    assert expected, "each of these files has a site"
    assert _by_units(rel, text) == expected


def test_a_definition_moved_down_keeps_its_unit_and_its_sites_follow():
    text = (FIXTURES / "dense_gpt/model.py").read_text()
    moved = text.replace("import math\n", "import math\n\nSPARE = 1  # a new line above every class\n\n", 1)
    before, after = analysis_units.cut(text).units, analysis_units.cut(moved).units
    assert {u.key for u in after} - {u.key for u in before} == {after[0].key}, "only the top-level unit changed"
    old, new = _by_units("model.py", text), _by_units("model.py", moved)
    assert [s.start_line + 3 for s in old["sdpa_attention"]] == [s.start_line for s in new["sdpa_attention"]]


def test_too_deep_for_python_is_said_so_without_parsing_further():
    cut = analysis_units.cut("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    assert cut.too_deep and not cut.units
    assert analysis_units.cut("x = (\n").too_deep is False


@pytest.mark.parametrize("rel", ["dense_gpt/model.py", "moe_gpt/model.py"])
def test_a_quick_fix_from_units_is_the_whole_file_rewrite(rel: str):
    from pygls.workspace import PositionCodec

    from infrarsi_server.analysis import unit_edits
    from tests.server.lsp import apply_edits

    text = (FIXTURES / rel).read_text()
    patch = REGISTRY["sdpa_attention"]
    touched = [u for u in analysis_units.cut(text).units if patch.may_apply(u.text)]
    rewritten = worker.rewrite_units(rel, [u.text for u in touched], patch.name)
    edits = unit_edits(text, list(zip(touched, rewritten, strict=True)), PositionCodec())
    assert edits, "the attention's definition maps back to the document"
    assert apply_edits(text, edits) == patch.rewrite(text)
