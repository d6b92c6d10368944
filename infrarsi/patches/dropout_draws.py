"""Where a model draws dropout masks in training, read from its source: what a patch that changes the
order of those draws must know before it is tried.

A dropout layer draws one random number per element, in the order the elements lie in memory, from
the generator every random op of the step shares. A patch that splits the batch (micro-batches run
each layer's dropout in turn, interleaving the layers' draws) or stores activations channels-last
(the same draws land on other elements) trains with other masks: the loss drifts from the
baseline's from step 0 (MNIST's two dropout layers: 0.032 at step 0, docs/benchmarks.md), and no
loss check can tell that from a wrong model. Such a patch is not tried where this finds an active
dropout (``Patch.refusal``).

Active: a dropout layer built with a literal probability above 0 or with its default (0.5), or a
functional dropout called so; a probability read from a config or an argument is not known here,
and the trial's loss check decides as before. Spatial: a dropout on a convolutional activation (a
``Dropout2d``/``Dropout3d``, or a dropout the forward calls before it flattens or reshapes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

from infrarsi.patches._cst import code, dotted

LAYERS = {"Dropout": False, "Dropout1d": False, "AlphaDropout": False, "FeatureAlphaDropout": True,
          "Dropout2d": True, "Dropout3d": True}
"""``torch.nn`` dropout layers, and whether they drop whole feature maps of a convolution."""
FUNCTIONS = {"dropout": False, "alpha_dropout": False, "dropout1d": False, "dropout2d": True, "dropout3d": True,
             "feature_alpha_dropout": True}
FLATTENS = ("flatten", "view", "reshape")
DEFAULT_P = 0.5


@dataclass(frozen=True, slots=True)
class DropoutSite:
    path: str
    line: int
    spatial: bool
    """On a convolutional activation, where channels-last changes which element each draw falls on."""

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def active_dropout(sources: Mapping[str, str]) -> list[DropoutSite]:
    """Every active dropout in ``sources`` (path -> text; files that do not parse are skipped)."""
    found: list[DropoutSite] = []
    for path, text in sources.items():
        if "ropout" not in text:
            continue
        try:
            wrapper = MetadataWrapper(cst.parse_module(text))
        except cst.ParserSyntaxError:
            continue
        finder = _Finder(path)
        wrapper.visit(finder)
        found += finder.sites()
    return found


def _probability(call: cst.Call, positional: int) -> float | None:
    """The call's dropout probability when it is a literal or the default; None when not known."""
    for i, a in enumerate(call.args):
        if (a.keyword is None and i == positional) or (a.keyword is not None and a.keyword.value == "p"):
            try:
                return float(code(a.value))
            except ValueError:
                return None
    return DEFAULT_P


def _training_off(call: cst.Call) -> bool:
    return any(a.keyword is not None and a.keyword.value == "training" and code(a.value) == "False" for a in call.args)


def _layer(node: cst.BaseExpression) -> str | None:
    """The dropout layer ``node`` builds with an active probability (``nn.Dropout(0.25)``), or None."""
    if not isinstance(node, cst.Call):
        return None
    name = (dotted(node.func) or "").rsplit(".", 1)[-1]
    return name if name in LAYERS and (_probability(node, 0) or 0.0) > 0 else None


class _Finder(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, path: str):
        self.path = path
        self.found: list[DropoutSite] = []
        self.layers: dict[str, tuple[int, bool]] = {}
        """``self.<attr>`` -> (line, spatial by kind) of an active dropout layer assigned to it."""
        self.placed: set[int] = set()
        """Layer calls already placed (assigned to an attribute, or an item of a ``Sequential``)."""
        self.before_flatten: set[str] = set()
        """What a function calls before it flattens (``self.dropout1``)."""
        self.lines_before_flatten: set[int] = set()

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def visit_Assign(self, node: cst.Assign) -> None:
        name = _layer(node.value)
        if name is None:
            return
        for target in node.targets:
            attr = code(target.target)
            if attr.startswith("self."):
                self.layers[attr] = (self._line(node), LAYERS[name])
                self.placed.add(id(node.value))

    def visit_Call(self, node: cst.Call) -> None:
        head, _, name = (dotted(node.func) or "").rpartition(".")
        if name == "Sequential":
            # An item before the Flatten acts on the convolutions' activations.
            for i, a in enumerate(node.args):
                kind = _layer(a.value)
                if kind is not None:
                    later = "".join(code(b.value) for b in node.args[i + 1:])
                    self.found.append(DropoutSite(self.path, self._line(a), LAYERS[kind] or "Flatten(" in later))
                    self.placed.add(id(a.value))
        elif (kind := _layer(node)) is not None and id(node) not in self.placed:
            self.found.append(DropoutSite(self.path, self._line(node), LAYERS[kind]))
        elif name in FUNCTIONS and head in ("F", "nn.functional", "torch.nn.functional") and not _training_off(node) \
                and (_probability(node, 1) or 0.0) > 0:
            self.found.append(DropoutSite(self.path, self._line(node), FUNCTIONS[name]))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        # A dropout called in a statement before one that flattens or reshapes acts on the
        # convolution's activations (a forward's usual shape: conv, pool, dropout, flatten, linear).
        statements = list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []
        for i, stmt in enumerate(statements):
            if any(f"{f}(" in code(s) for s in statements[i + 1:] for f in FLATTENS):
                for call in m.findall(stmt, m.Call()):
                    assert isinstance(call, cst.Call)
                    self.before_flatten.add(code(call.func))
                    self.lines_before_flatten.add(self._line(call))

    def sites(self) -> list[DropoutSite]:
        layers = [DropoutSite(self.path, line, spatial or attr in self.before_flatten)
                  for attr, (line, spatial) in self.layers.items()]
        others = [DropoutSite(s.path, s.line, s.spatial or s.line in self.lines_before_flatten) for s in self.found]
        return sorted(layers + others, key=lambda s: s.line)
