"""What every patch is: a libcst codemod plus the facts the search and the editor need about it.

A patch's codemod both finds and rewrites: every place it changes is recorded with its source
range, so ``sites`` (the editor's diagnostics) and ``rewrite`` (the trial's source) can never
disagree about where a patch applies.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst
from libcst.codemod import (
    Codemod,
    CodemodContext,
    TransformExit,
    TransformFailure,
    TransformSkip,
    VisitorBasedCodemodCommand,
    transform_module,
)
from libcst.metadata import CodeRange, PositionProvider

from infrarsi.contract import Knob, KnobValue
from infrarsi.hunk import Hunk
from infrarsi.patches.dropout_draws import active_dropout
from infrarsi.priors.builtin import Belief

APPLIED = "applied"
SKIPPED = "skipped"
FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Site:
    """Where a patch applies: 1-based lines, 0-based columns, like libcst's CodeRange."""

    path: str
    start_line: int
    start_col: int
    end_line: int
    end_col: int
    message: str


@dataclass(slots=True)
class PatchOutcome:
    """One patch applied to one work tree: applied, skipped-with-reason or failed-with-reason."""

    name: str
    status: str
    """applied | skipped | failed."""
    reason: str = ""
    changed: dict[str, str] = field(default_factory=dict)
    """Repo-relative path -> the file's new source."""
    hunks: list[Hunk] = field(default_factory=list)
    """Exactly what changed, for the trial's audit record."""
    knobs: list[Knob] = field(default_factory=list)
    """Knobs the patch added to gate itself (on by default; the search or the user may turn them off)."""
    breaks_contract: bool = False
    """Failed because the change would break the contract (scope, locked files, what the static
    checks forbid): the candidate's trial ends ``contract``, a proposal is refused as ``contract``.
    The reason says so to people (``contract: …``); code reads this flag."""

    @property
    def applied(self) -> bool:
        return self.status == APPLIED


class PatchError(Exception):
    """The patch could not run on this source (it does not parse, or the codemod broke)."""


@dataclass(frozen=True, slots=True)
class Rewrite:
    code: str
    sites: list[Site]
    knobs: list[Knob]


class PatchCodemod(VisitorBasedCodemodCommand):
    """Base of every patch's codemod: records what it changed, with the original source range."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    # No patch uses libcst's matcher decorators; their bookkeeping on every node made each codemod
    # pass three times slower than a plain transformer's. Dispatch as a plain transformer does.
    on_visit = cst.CSTTransformer.on_visit
    # libcst declares the matcher transformer's on_leave without FlattenSentinel, which the plain one returns.
    on_leave = cst.CSTTransformer.on_leave  # type: ignore[assignment]
    on_visit_attribute = cst.CSTTransformer.on_visit_attribute
    on_leave_attribute = cst.CSTTransformer.on_leave_attribute

    def __init__(self, context: CodemodContext) -> None:
        # Codemod's own set-up only: the matcher decorators' (inspecting every method of the class,
        # for each instance) served nothing here and cost more than a small unit's whole pass
        Codemod.__init__(self, context)
        self.found: list[tuple[CodeRange, str]] = []
        self.knobs: list[Knob] = []

    def mark(self, original_node: cst.CSTNode, message: str, end: cst.CSTNode | None = None) -> None:
        """Record a change spanning ``original_node`` (to ``end``): nodes of the tree as parsed."""
        where = self.position(original_node)
        if end is not None:
            where = CodeRange(where.start, self.position(end).end)
        self.found.append((where, message))

    def position(self, original_node: cst.CSTNode) -> CodeRange:
        """The node's range in the source as parsed; only valid while the codemod runs."""
        return self.get_metadata(PositionProvider, original_node)

    def sites(self, path: str) -> list[Site]:
        """What the codemod changed, as sites in ``path``: the run's patches and the editor's analysis
        both read a pass through here."""
        return [Site(path, where.start.line, where.start.column, where.end.line, where.end.column, message)
                for where, message in self.found]


class Patch:
    """One source patch. Subclasses set the class attributes and ``codemod``."""

    name: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    numerics_by_design: ClassVar[bool] = False
    """True when the patch changes float results on purpose (judged on the looser tolerance)."""
    gpu_only: ClassVar[bool] = False
    """True when it only means something on CUDA; it is skipped on CPU."""
    redraws_dropout: ClassVar[str | None] = None
    """``any`` or ``spatial``: the patch changes which random number a dropout draws for which
    element (of any dropout, or of one on a convolution's activations), so where the model has
    such a dropout active no loss check can show it trains the same model and a run does not try
    it (patches/dropout_draws.py); ``redraw_words`` says how, for the refusal."""
    redraw_words: ClassVar[str] = ""
    gate_knob: ClassVar[str | None] = None
    """The knob the patch adds to switch itself off, when the script has none."""
    gate_role: ClassVar[str | None] = None
    """The contract role of that knob; a script whose contract already has one is left alone."""
    knob_off: ClassVar[KnobValue | None] = None
    """Set when the search tunes the knob the patch adds rather than switching the patch: the knob's
    value that is the script as written (gradient_accumulation: 1 split). Init puts that knob in the
    contract (``patches.patch_knobs``); its other values apply the patch."""
    prior: ClassVar[dict[str, Belief]]
    """What the patch is believed to do on each device kind (cpu, cuda) before any trial has run:
    the one source of the search's prior for ``patch:<name>`` (``declared_priors``)."""
    codemod: ClassVar[type[PatchCodemod]]
    needles: ClassVar[tuple[str, ...]] = ()
    """Text a source must contain for the patch to possibly apply: spares parsing the others."""
    requires: ClassVar[tuple[tuple[str, ...], ...]] = ()
    """More such tests, all of which must hold: at least one text of each group occurs."""
    absent: ClassVar[tuple[str, ...]] = ()
    """Text whose presence anywhere in a file means the patch leaves that file alone (its own switch)."""
    reach: ClassVar[str] = "definition"
    """What a site depends on besides the file's imports, so what the editor analyses on its own:
    ``definition`` one top-level definition; ``top`` the top-level statements that are not
    definitions; ``module`` the whole file."""

    def refusal(self, device: str, sources: Mapping[str, str]) -> str | None:
        """Why a run on ``device`` over the editable ``sources`` (path -> text) does not try this
        patch (None: it does)."""
        if self.gpu_only and device != "cuda":
            return "GPU-only patch on a CPU run"
        if self.redraws_dropout is None:
            return None
        drops = [d for d in active_dropout(sources) if self.redraws_dropout == "any" or d.spatial]
        if not drops:
            return None
        return (f"the model draws dropout masks ({', '.join(d.where() for d in drops)}) and {self.redraw_words}, "
                "so no loss check can show it trains the same model")

    def may_apply(self, source: str) -> bool:
        """The cheap test: False when the codemod cannot find a site in ``source`` or the file has
        the patch's own switch (``absent``)."""
        if any(text in source for text in self.absent):
            return False
        groups = ((self.needles,) if self.needles else ()) + self.requires
        return all(any(n in source for n in group) for group in groups)

    def transform(self, path: str, source: str) -> Rewrite:
        """Run the codemod on ``source``; raises PatchError when it cannot."""
        if not self.may_apply(source):
            return Rewrite(source, [], [])
        command = self.codemod(CodemodContext(filename=path))
        result = transform_module(command, source)
        if isinstance(result, TransformFailure):
            raise PatchError(f"{self.name}: {type(result.error).__name__}: {result.error}")
        if isinstance(result, TransformExit):  # libcst caught a Ctrl+C inside the codemod: pass it on
            raise KeyboardInterrupt
        if isinstance(result, TransformSkip) or not command.found:
            return Rewrite(source, [], [])
        return Rewrite(result.code, command.sites(path), command.knobs)

    def sites(self, path: str, source: str) -> list[Site]:
        """Where this patch would change ``source`` (none when it does not parse)."""
        try:
            return self.transform(path, source).sites
        except PatchError:
            return []

    def rewrite(self, source: str) -> str | None:
        """The patched source, or None when the patch does not apply."""
        result = self.transform("<source>", source)
        return result.code if result.sites else None


def diff_hunks(path: str, before: str, after: str) -> list[Hunk]:
    """The unified-diff hunks turning ``before`` into ``after`` (3 lines of context)."""
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}", n=3
        )
    )
    hunks: list[Hunk] = []
    header = ""
    body: list[str] = []
    for line in lines[2:]:
        if line.startswith("@@"):
            if header:
                hunks.append(Hunk(path, header, "".join(body)))
            header, body = line.rstrip("\n"), []
        else:
            body.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    if header:
        hunks.append(Hunk(path, header, "".join(body)))
    return hunks
