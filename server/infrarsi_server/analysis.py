"""What the core finds in one version of one document, computed once, off the event loop.

libcst is slow on big files (every patch parses and walks the whole module: seconds for a few
thousand lines), so the work runs in one background thread and is cached by the document's
path, the hash of its text and the contract's scope and knobs. Code actions, hover and code lenses then
only look things up: the same patch run that finds the sites also yields the patched source,
and with it the quick fix's edits.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider
from lsprotocol import types
from pygls.workspace import PositionCodec

from infrarsi import patches as patch_library
from infrarsi.codemods.insert_probe import training_loop
from infrarsi.contract import Contract, Knob
from infrarsi.patches import PatchError, Site
from infrarsi_server import convert

CACHE_SIZE = 32


@dataclass(frozen=True, slots=True)
class PatchFinding:
    name: str
    sites: list[Site]
    edits: list[types.TextEdit]
    """The quick fix: turns the analysed text into the patch's rewrite of it."""


@dataclass(frozen=True, slots=True)
class KnobLine:
    knob: Knob
    line: int
    """1-based line of its definition in this document."""


@dataclass(slots=True)
class Analysis:
    text: str
    lines: list[str]
    patches: list[PatchFinding] = field(default_factory=list)
    knobs: list[KnobLine] = field(default_factory=list)
    loop: tuple[int, int] | None = None
    """1-based first and last line of the training loop."""
    has_probe: bool = False


def _gate_taken(patch, contract: Contract | None) -> bool:
    """The script already has its own knob for what the patch would add (the search tunes that)."""
    return contract is not None and patch.gate_role is not None and bool(contract.by_role(patch.gate_role))


def _patches(rel: str, text: str, contract: Contract | None, codec: PositionCodec) -> list[PatchFinding]:
    device = contract.memory.device if contract else "cpu"
    found = []
    for name, patch in patch_library.REGISTRY.items():
        if _gate_taken(patch, contract) or (patch.gpu_only and device != "cuda"):
            continue
        try:
            rewrite = patch.transform(rel, text)
        except PatchError:
            continue
        if rewrite.sites and rewrite.code != text:
            found.append(PatchFinding(name, list(rewrite.sites), convert.text_edits(text, rewrite.code, codec)))
    return found


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
        path, _, number = knob.source.rpartition(":")
        if path != rel:
            continue
        pattern = _definition_pattern(knob)
        recorded = int(number) if number.isdigit() else 0
        # where init saw it, unless the file moved since; then the first line that defines it
        if 0 < recorded <= len(lines) and pattern.search(lines[recorded - 1]):
            out.append(KnobLine(knob, recorded))
            continue
        hit = next((i for i, line in enumerate(lines, 1) if pattern.search(line)), None)
        if hit is not None:
            out.append(KnobLine(knob, hit))
    return out


def _loop(text: str) -> tuple[int, int] | None:
    if ".backward(" not in text:  # no training loop without a backward call: spare the parse
        return None
    try:
        wrapper = MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True)
    except cst.ParserSyntaxError:
        return None
    loop = training_loop(wrapper.module)
    if loop is None:
        return None
    where = wrapper.resolve(PositionProvider)[loop]
    return where.start.line, where.end.line


def analyze(rel: str | None, text: str, contract: Contract | None, codec: PositionCodec) -> Analysis:
    lines = text.splitlines(keepends=True)
    return Analysis(
        text=text,
        lines=lines,
        patches=_patches(rel, text, contract, codec) if editable(rel, contract) else [],
        knobs=knob_lines(rel, lines, contract),
        loop=_loop(text),
        has_probe="probe.step(" in text,
    )


def editable(rel: str | None, contract: Contract | None) -> bool:
    """Patches may touch this file: in the contract's scope, or any Python file before init."""
    if rel is None or not rel.endswith(".py"):
        return False
    return contract is None or contract.scope.allows(rel)


class Analyses:
    """Analyses by path, text hash and the contract's scope and knobs, computed one at a time in a thread."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="infrarsi-analysis")
        self._cache: OrderedDict[tuple, Future] = OrderedDict()

    def key(self, path: Path, text: str, contract: Contract | None) -> tuple:
        # only the parts of the contract an analysis reads: doctor's reference losses do not count
        scope = None if contract is None else (
            tuple(contract.scope.editable), contract.memory.device,
            tuple((k.name, k.role, k.flag, k.source, k.default, tuple(k.domain)) for k in contract.knobs))
        return str(path), hashlib.blake2b(text.encode(), digest_size=16).digest(), scope

    async def get(self, key: tuple, rel: str | None, text: str, contract: Contract | None, codec: PositionCodec) -> Analysis:
        future = self._cache.get(key)
        if future is None:
            future = self._pool.submit(analyze, rel, text, contract, codec)
            self._cache[key] = future
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return await asyncio.wrap_future(future)
