"""What runs in an analysis process: the patch library's codemods over units, and a quick fix's rewrite.

One parse per unit, shared by every patch: the unit's module is wrapped once, its positions
resolved once, and each patch whose needles occur in the unit visits that same tree (libcst
trees are immutable, so one patch's rewrite cannot disturb the next patch's view). Patches
whose needles do not occur in a unit never see it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile
from libcst.metadata import MetadataWrapper, PositionProvider

from infrarsi import patches as patch_library
from infrarsi.knobs.loop import training_loop
from infrarsi.patches import PatchError, Site


@dataclass(frozen=True, slots=True)
class UnitFindings:
    sites: dict[str, list[Site]] = field(default_factory=dict)
    """Patch name -> its sites, in the unit's own lines (the caller maps them to the document's)."""
    loop: tuple[int, int] | None = None
    """The training loop's first and last line in the unit, when the unit holds it."""
    parsed: bool = True


def analyse(rel: str, units: list[tuple[str, list[str], bool]]) -> list[UnitFindings]:
    """Each unit's text with the patches to try on it, and whether to look for the training loop."""
    return [_unit(rel, text, names, find_loop) for text, names, find_loop in units]


def _unit(rel: str, text: str, names: list[str], find_loop: bool) -> UnitFindings:
    wanted = [n for n in names if patch_library.REGISTRY[n].may_apply(text)]
    look_for_loop = find_loop and ".backward(" in text
    if not wanted and not look_for_loop:
        return UnitFindings()
    try:
        wrapper = MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True)
    except cst.ParserSyntaxError:
        return UnitFindings(parsed=False)
    positions = wrapper.resolve(PositionProvider)
    found: dict[str, list[Site]] = {}
    for name in wanted:
        command = patch_library.REGISTRY[name].codemod(CodemodContext(filename=rel, wrapper=wrapper))
        try:
            wrapper.visit(command)
        except SkipFile:
            continue
        except Exception:  # noqa: BLE001 - a codemod that breaks on this unit finds nothing here, as in Patch.sites
            continue
        if command.found:
            found[name] = command.sites(rel)
    loop = None
    if look_for_loop:
        trains = training_loop(wrapper.module)
        if trains is not None:
            where = positions[trains.node]
            loop = (where.start.line, where.end.line)
    return UnitFindings(found, loop)


def ready() -> bool:
    """A job that does nothing: starting it starts the forkserver, which imports this module."""
    return True


def rewrite_units(rel: str, texts: list[str], name: str) -> list[str | None]:
    """Each unit as the patch rewrites it, None where it does not apply."""
    return [rewrite(rel, text, name) for text in texts]


def rewrite(rel: str, text: str, name: str) -> str | None:
    """The whole document as the patch rewrites it (the quick fix), or None when it does not apply."""
    try:
        result = patch_library.REGISTRY[name].transform(rel, text)
    except PatchError:
        return None
    return result.code if result.sites and result.code != text else None
