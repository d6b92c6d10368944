"""What the core finds in one version of one document, computed off the event loop and cached.

A document is cut into units (``analysis_units.py``: each top-level definition with the file's imports,
and the rest of the top level); each unit is analysed once per text, in a killable process
(``isolation.py``), by every patch whose needles occur in it over one shared parse
(``worker.py``). An edit re-analyses only the units whose text changed. Patches whose sites
depend on the whole file (``Patch.reach == "module"``) see the whole text, and only when it
holds their needles; that run does not look for the training loop again (a loop lies within one
unit). The quick fix's edit, the patch's rewrite of the whole document, is computed when the
client resolves the action, not for every diagnostic.

Bad input never reaches the client as a failure: a file too large, too deep for the parser, or
whose analysis crashed or overran its time limit gets one diagnostic saying so (``problem``).
"""

from __future__ import annotations

import asyncio
import difflib
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from lsprotocol import types
from pygls.workspace import PositionCodec

from infrarsi import patches as patch_library
from infrarsi.contract import Contract, Knob
from infrarsi.patches import Site
from infrarsi_server import analysis_units, convert, worker
from infrarsi_server.isolation import Isolated, JobResult

DOCUMENTS = 32
UNITS = 4096
MAX_BYTES = 2_000_000
"""Larger files are not analysed (a generated file, a data dump saved as .py)."""
JOB_CHARS = 60_000
"""Units go to the analysis processes in jobs of about this much text, each with its own time limit."""


@dataclass(frozen=True, slots=True)
class PatchSites:
    """Where one patch applies in the document (not the bank's ``PatchFinding``, a patch's verdict
    in a run)."""
    name: str
    sites: list[Site]


@dataclass(frozen=True, slots=True)
class KnobLine:
    knob: Knob
    line: int
    """1-based line of its definition in this document."""


@dataclass(slots=True)
class Analysis:
    text: str
    lines: list[str]
    patches: list[PatchSites] = field(default_factory=list)
    knobs: list[KnobLine] = field(default_factory=list)
    loop: tuple[int, int] | None = None
    """1-based first and last line of the training loop."""
    has_probe: bool = False
    problem: str = ""
    """Why (part of) the document was not analysed, as the one-line diagnostic shows it."""



def patch_names(rel: str | None, text: str, contract: Contract | None) -> list[str]:
    """The library patches that may apply to this document: the cheap, whole-text checks."""
    if not editable(rel, contract):
        return []
    device = contract.memory.device if contract else "cpu"
    return [name for name in patch_library.REGISTRY if patch_library.may_apply(name, text, contract, device)]


def _definition_pattern(knob: Knob) -> re.Pattern:
    """A line defining the knob: its flag in quotes (argparse), or ``name =`` / ``name:`` at line start."""
    flag = re.escape(knob.flag) if knob.flag else None
    name = re.escape(knob.name)
    parts = [rf"^\s*{name}\s*(:[^=]*)?=(?!=)"]
    if flag:
        parts.insert(0, rf"""["']{flag}["']""")
    return re.compile("|".join(parts))


def knob_lines(rel: str | None, lines: list[str], contract: Contract | None) -> list[KnobLine]:
    out = []
    for knob in contract.knobs if contract else ():
        if knob.source_path != rel:
            continue
        pattern = _definition_pattern(knob)
        recorded = knob.source_line
        # where init saw it, unless the file moved since; then the first line that defines it
        if 0 < recorded <= len(lines) and pattern.search(lines[recorded - 1]):
            out.append(KnobLine(knob, recorded))
            continue
        hit = next((i for i, line in enumerate(lines, 1) if pattern.search(line)), None)
        if hit is not None:
            out.append(KnobLine(knob, hit))
    return out


def editable(rel: str | None, contract: Contract | None) -> bool:
    """Patches may touch this file: in the contract's scope, or any Python file before init."""
    if rel is None or not rel.endswith(".py"):
        return False
    return contract is None or contract.scope.allows(rel)


def _map(site: Site, lines: tuple[int, ...]) -> Site:
    """A site in a unit's lines -> the same site in the document's lines."""
    last = len(lines)
    return Site(site.path, lines[min(site.start_line, last) - 1], site.start_col,
                lines[min(site.end_line, last) - 1], site.end_col, site.message)


def plan_units(text: str, cut: analysis_units.Cut, names: list[str]) -> list[tuple[analysis_units.Unit, list[str]]]:
    """Each unit with the patches that may find a site in it; the whole text for ``module`` patches."""
    reach = {n: patch_library.REGISTRY[n].reach for n in names}
    local = [n for n in names if reach[n] == "definition"]
    top = [n for n in names if reach[n] == "top"]
    whole = [n for n in names if reach[n] == "module"]
    plan = [(u, local + top if u.top_level else local) for u in cut.units]
    if whole:
        plan.append((analysis_units.Unit(text, tuple(range(1, text.count("\n") + 3)), whole=True), whole))
    return plan


def _jobs(todo: list[tuple[analysis_units.Unit, list[str]]]) -> list[list[tuple[analysis_units.Unit, list[str]]]]:
    jobs: list[list[tuple[analysis_units.Unit, list[str]]]] = []
    size = JOB_CHARS
    for item in todo:
        if size + len(item[0].text) > JOB_CHARS:
            jobs.append([])
            size = 0
        jobs[-1].append(item)
        size += len(item[0].text)
    return jobs


def unit_edits(text: str, rewritten: list[tuple[analysis_units.Unit, str | None]], codec: PositionCodec
               ) -> list[types.TextEdit] | None:
    """The document edits that make each unit's rewrite; None where a change does not map to one
    place in the document (it spans the gap between the imports and the definition, or two units
    change the same lines): the caller then rewrites the whole document."""
    edits: list[tuple[int, int, str]] = []
    doc = text.splitlines(keepends=True)
    if doc and not doc[-1].endswith(("\n", "\r")):
        return None
    for unit, new in rewritten:
        if new is None:
            continue
        old_lines, new_lines = unit.text.splitlines(keepends=True), new.splitlines(keepends=True)
        matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            span = unit.lines[i1:i2]
            if any(b != a + 1 for a, b in pairwise(span)):
                return None
            if i1 == i2:  # an insertion: only where the unit's lines are the document's neighbours
                if 0 < i1 < len(unit.lines) and unit.lines[i1] != unit.lines[i1 - 1] + 1:
                    return None
                at = unit.lines[i1] - 1 if i1 < len(unit.lines) else unit.lines[-1]
                edits.append((at, at, "".join(new_lines[j1:j2])))
            else:
                edits.append((span[0] - 1, span[-1], "".join(new_lines[j1:j2])))
    edits.sort()
    if any(b[0] < a[1] or (a[0] == a[1] == b[0] == b[1]) for a, b in pairwise(edits)):
        return None
    return [types.TextEdit(range=types.Range(start=types.Position(line=a, character=0),
                                             end=types.Position(line=b, character=0)), new_text=t)
            for a, b, t in edits]


def _too_deep(detail: str) -> str:
    return f"InfraRSI: file too deep to analyse ({detail})"


class Analyses:
    """Analyses by path, text hash and the contract's scope and knobs; units by text; fixes on demand."""

    def __init__(self, log: Callable[[str], None] = lambda _m: None) -> None:
        self._isolated = Isolated(["infrarsi_server.worker"])
        self._documents: OrderedDict[tuple, asyncio.Task] = OrderedDict()
        self._units: OrderedDict[tuple, worker.UnitFindings] = OrderedDict()
        self._fixes: OrderedDict[tuple, asyncio.Task] = OrderedDict()
        self.log = log

    async def warm(self) -> None:
        """Start the analysis processes' forkserver (it imports libcst) before the first document."""
        result = await self._isolated.call("warm-up", worker.ready)
        if not result.ok:
            self.log(f"the analysis processes did not start: {result.status} ({result.detail})")

    def key(self, path: Path, text: str, contract: Contract | None) -> tuple:
        # only the parts of the contract an analysis reads: doctor's reference losses do not count
        scope = None if contract is None else (
            tuple(contract.scope.editable), contract.memory.device,
            tuple((k.name, k.role, k.flag, k.source, k.default, tuple(k.domain)) for k in contract.knobs))
        return str(path), analysis_units.digest(text), scope

    async def get(self, key: tuple, rel: str | None, text: str, contract: Contract | None,
                  codec: PositionCodec) -> Analysis:
        task = self._documents.get(key)
        if task is None:
            task = asyncio.ensure_future(self._analyse(key[0], rel, text, contract))
            self._documents[key] = task
            while len(self._documents) > DOCUMENTS:
                self._documents.popitem(last=False)
        else:
            self._documents.move_to_end(key)
        return await asyncio.shield(task)

    async def _analyse(self, owner: str, rel: str | None, text: str, contract: Contract | None) -> Analysis:
        text = analysis_units.clean(text)
        lines = text.splitlines(keepends=True)
        analysis = Analysis(text=text, lines=lines, knobs=knob_lines(rel, lines, contract),
                            has_probe="probe.step(" in text)
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_BYTES:
            analysis.problem = (f"InfraRSI: file too large to analyse ({size // 1000:,} KB; "
                                f"the limit is {MAX_BYTES // 1000:,} KB)")
            self.log(f"{owner}: {analysis.problem}")
            return analysis
        names = patch_names(rel, text, contract)
        if not names and ".backward(" not in text:
            return analysis
        cut = await asyncio.to_thread(analysis_units.cut, text)
        if cut.too_deep:
            analysis.problem = _too_deep(cut.error)
            self.log(f"{owner}: {analysis.problem}")
            return analysis
        plan = plan_units(text, cut, names)
        results = await self._findings(owner, rel or "", plan)
        sites: dict[str, list[Site]] = {}
        for (unit, _names), found in zip(plan, results, strict=True):
            if isinstance(found, JobResult):
                analysis.problem = analysis.problem or _too_deep(found.detail)
                continue
            for name, in_unit in found.sites.items():
                sites.setdefault(name, []).extend(_map(s, unit.lines) for s in in_unit)
            if found.loop is not None and analysis.loop is None:
                analysis.loop = (unit.lines[found.loop[0] - 1], unit.lines[found.loop[1] - 1])
        if analysis.problem:
            self.log(f"{owner}: {analysis.problem}")
        analysis.patches = [
            PatchSites(name, sorted(set(sites[name]), key=lambda s: (s.start_line, s.start_col)))
            for name in patch_library.REGISTRY if sites.get(name)
        ]
        return analysis

    async def _findings(self, owner: str, rel: str, plan: list[tuple[analysis_units.Unit, list[str]]]
                        ) -> list[worker.UnitFindings | JobResult]:
        """Each unit's findings, from the cache or a job; a failed job's result stands for its units."""
        keys = [(unit.key, rel, tuple(names), unit.whole) for unit, names in plan]
        todo = [(unit, names) for (unit, names), key in zip(plan, keys, strict=True) if key not in self._units]
        failed: dict[bytes, JobResult] = {}
        for job in _jobs(todo):
            result = await self._isolated.call(owner, worker.analyse, rel,
                                               [(u.text, names, not u.whole) for u, names in job])
            for i, (unit, names) in enumerate(job):
                if result.ok:
                    self._store((unit.key, rel, tuple(names), unit.whole), result.value[i])
                else:
                    failed[unit.key] = result
        out: list[worker.UnitFindings | JobResult] = []
        for (unit, _names), key in zip(plan, keys, strict=True):
            found = self._units.get(key)
            out.append(found if found is not None else failed.get(unit.key, JobResult("failed", detail="evicted")))
        return out

    def _store(self, key: tuple, found: worker.UnitFindings) -> None:
        self._units[key] = found
        self._units.move_to_end(key)
        while len(self._units) > UNITS:
            self._units.popitem(last=False)

    async def fix(self, key: tuple, rel: str, text: str, name: str, codec: PositionCodec) -> list[types.TextEdit] | None:
        """The quick fix for patch ``name``: edits turning the document into the patch's rewrite of it."""
        fix_key = (key, name)
        task = self._fixes.get(fix_key)
        if task is None:
            task = asyncio.ensure_future(self._fix(key[0], rel, analysis_units.clean(text), name, codec))
            self._fixes[fix_key] = task
            while len(self._fixes) > DOCUMENTS:
                self._fixes.popitem(last=False)
        return await asyncio.shield(task)

    async def _fix(self, owner: str, rel: str, text: str, name: str, codec: PositionCodec) -> list[types.TextEdit] | None:
        patch = patch_library.REGISTRY[name]
        if patch.reach == "definition" and patch.gate_knob is None:
            # the patch changes only the definitions it finds sites in: rewrite just those
            cut = await asyncio.to_thread(analysis_units.cut, text)
            touched = [u for u in cut.units if patch.may_apply(u.text)]
            result = await self._isolated.call(owner, worker.rewrite_units, rel, [u.text for u in touched], name)
            if result.ok:
                edits = unit_edits(text, list(zip(touched, result.value, strict=True)), codec)
                if edits is not None:
                    return edits
        result = await self._isolated.call(owner, worker.rewrite, rel, text, name)
        if not result.ok:
            self.log(f"{owner}: the quick fix {name} was not computed: {result.status} ({result.detail})")
            return None
        if result.value is None:
            return None
        return await asyncio.to_thread(convert.text_edits, text, result.value, codec)
