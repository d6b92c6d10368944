"""The training loop: which loop trains, where it calls backward and steps the optimizer, and how
running the script reaches it. The one place init, the probe codemod, the data flow and the
editor ask.

Read from source only (libcst):

- ``training_loop`` is the loop the probe goes into and the editor marks: the innermost ``for`` /
  ``while`` that calls ``.backward()`` (``is_backward``) and steps an optimizer
  (``is_optimizer_step``), with its first backward and whether that runs in a micro-step loop.
- ``find_loop`` says how running the script reaches training: a ``.backward()`` call or a
  ``Trainer``'s ``train()`` / ``fit()`` (Hugging Face, Lightning), from what runs when the script is
  run — its module-level statements, or its ``if __name__ == "__main__":`` block — directly or
  through functions of the script and of the repo modules it imports.
- The data flow reads a loop's calls by name instead (``loop_role``, ``STEP_CALLS``,
  ``mentions_backward``): a bare ``backward(loss)``, a DeepSpeed ``engine.step()`` and a scheduler's
  ``step()`` count there, for a loop that steps anything is no micro-step loop, while the probe
  must know which statement steps the optimizer. The readings disagree on such code; each caller
  keeps the one it had.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeGuard

import libcst as cst
from libcst.metadata import MetadataWrapper

from infrarsi.knobs.source import ParsedFile, dotted, walk


def backward_receiver(node: cst.CSTNode) -> cst.BaseExpression | None:
    """What a ``.backward()`` call is called on (``loss``, ``scaler.scale(loss)``); None for any other node."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward":
        return node.func.value
    return None


def is_backward(node: cst.CSTNode) -> TypeGuard[cst.Call]:
    return backward_receiver(node) is not None


def is_optimizer_step(node: cst.CSTNode) -> bool:
    """``optimizer.step()``, ``opt.step()``, ``scaler.step(optimizer)``; not a scheduler's step."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "step"):
        return False
    owner = dotted(node.func.value).lower()
    return ("opt" in owner and "sched" not in owner) or owner.endswith("scaler")


def loops(node: cst.CSTNode) -> list[cst.For | cst.While]:
    """The ``for`` and ``while`` loops under ``node`` (itself included), outer before inner."""
    return [n for n in walk(node) if isinstance(n, (cst.For, cst.While))]


def _contains(node: cst.CSTNode, pred: Callable[[cst.CSTNode], bool]) -> bool:
    return any(pred(n) for n in walk(node))


@dataclass(frozen=True, slots=True, eq=False)
class TrainingLoop:
    node: cst.For | cst.While
    """The innermost loop calling both ``.backward()`` and an optimizer step."""
    backward: cst.Call
    """Its first ``.backward()`` call."""
    accumulates: bool
    """The backward runs in a loop of its own inside ``node``: gradient accumulation's micro-steps."""


def training_loop(module: cst.Module) -> TrainingLoop | None:
    """The first innermost loop that calls ``.backward()`` and an optimizer step, or None. Nested
    functions, lambdas and methods count: this reads where the loop is, not whether it runs."""
    candidates = [lp for lp in loops(module) if _contains(lp, is_backward) and _contains(lp, is_optimizer_step)]
    innermost = [c for c in candidates if not any(o is not c and o in loops(c) for o in candidates)]
    if not innermost:
        return None
    node = innermost[0]
    backward = next(n for n in walk(node) if is_backward(n))
    around = [lp for lp in loops(node) if backward in walk(lp)]
    return TrainingLoop(node, backward, accumulates=around[-1] is not node)


STEP_CALLS = frozenset({"backward", "step", "zero_grad"})
"""Names of an optimizer step's calls, as the data flow reads them: a condition guarding one bounds
the steps or the accumulation."""


def _called_name(call: cst.Call) -> str:
    """``step`` for ``sched.step()`` and ``step()``; '' for ``fns[0]()``."""
    if isinstance(call.func, cst.Name):
        return call.func.value
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else ""


def loop_role(loop: cst.For, nested: bool) -> str:
    """What a ``for`` loop is to the data flow, by the names its body calls: ``micro_steps`` (gradient
    accumulation) when it calls ``backward`` but no ``step`` inside another loop, ``steps`` when it
    calls ``backward`` otherwise, '' when it calls no ``backward``."""
    names = {_called_name(n) for n in walk(loop.body) if isinstance(n, cst.Call)}
    if "backward" not in names:
        return ""
    return "steps" if "step" in names or not nested else "micro_steps"


def mentions_backward(node: cst.CSTNode) -> bool:
    """``.backward(`` in ``node``'s code, comments and strings included: the data flow's reading of
    whether a loader's loop or function trains."""
    return ".backward(" in cst.Module([]).code_for_node(node)


KINDS = ("module_loop", "function_from_module", "main_guard", "trainer", "none")


@dataclass(frozen=True, slots=True)
class Loop:
    kind: str
    """module_loop | function_from_module | main_guard | trainer | none (see KINDS)."""
    why: str
    """One sentence: what was found and how the script reaches it."""
    where: str = ""
    """``file:line`` of the ``backward()`` or ``train()``/``fit()`` call."""

    @property
    def found(self) -> bool:
        return self.kind != "none"


def is_main_guard(stmt: cst.CSTNode) -> TypeGuard[cst.If]:
    if not isinstance(stmt, cst.If) or not isinstance(stmt.test, cst.Comparison):
        return False
    sides = [stmt.test.left, *(c.comparator for c in stmt.test.comparisons)]
    names = {dotted(s) for s in sides}
    strings = {s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)}
    return "__name__" in names and "__main__" in strings


def _own_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes under ``node`` that run with it: nested function and class bodies left out."""
    yield node
    for child in node.children:
        if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        yield from _own_nodes(child)


def _trainer_names(module: cst.Module) -> set[str]:
    """Variables assigned an instance of a class whose name ends in ``Trainer``."""
    out = set()
    for node in walk(module):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
            if dotted(node.value.func).rsplit(".", 1)[-1].endswith("Trainer"):
                out |= {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
    return out


def _library(module: cst.Module) -> str:
    code = module.code
    if "lightning" in code:
        return "a Lightning Trainer"
    if "transformers" in code:
        return "a Hugging Face Trainer"
    return "a Trainer"


class _Graph:
    """Module-level functions of the files, and which call backward, a trainer, or each other."""

    def __init__(self, files: list[ParsedFile]):
        self.files = files
        self.functions: dict[str, tuple[ParsedFile, cst.FunctionDef]] = {}
        for f in files:
            for stmt in f.module.body:
                if isinstance(stmt, cst.FunctionDef) and stmt.name.value not in self.functions:
                    self.functions[stmt.name.value] = (f, stmt)
        self.trainers = {f.rel: _trainer_names(f.module) for f in files}

    def direct(self, f: ParsedFile, nodes: Sequence[cst.CSTNode]) -> tuple[str, str, str] | None:
        """(kind, call text, file:line) of a backward or trainer call among ``nodes``' own code."""
        for top in nodes:
            for node in _own_nodes(top):
                if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
                    continue
                attr = node.func.attr.value
                target = dotted(node.func.value)
                if is_backward(node):
                    return "backward", f"{target or '…'}.backward()", f.where(node)
                if attr in ("train", "fit"):
                    obj = node.func.value
                    if isinstance(obj, cst.Call):
                        head = dotted(obj.func) + "(…)"
                        is_trainer = dotted(obj.func).rsplit(".", 1)[-1].endswith("Trainer")
                    else:
                        head = target
                        is_trainer = bool(target) and (
                            target in self.trainers[f.rel] or target.rsplit(".", 1)[-1].lower().endswith("trainer"))
                    if is_trainer:
                        return "trainer", f"{head}.{attr}() ({_library(f.module)})", f.where(node)
        return None

    def calls(self, nodes: Sequence[cst.CSTNode]) -> list[str]:
        """The files' functions these nodes call: by name, through an imported module
        (``train.train_and_evaluate(…)``), or handed to a runner that calls them (``app.run(main)``,
        ``fire.Fire(main)``, ``mp.spawn(train, …)``, ``Process(target=train)``)."""
        names = []
        for top in nodes:
            for node in _own_nodes(top):
                if not isinstance(node, cst.Call):
                    continue
                func = node.func
                if isinstance(func, cst.Name):
                    names.append(func.value)
                elif (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                      and func.value.value not in ("self", "cls")):
                    names.append(func.attr.value)
                names += [a.value.value for a in node.args if isinstance(a.value, cst.Name)]
        return [n for n in dict.fromkeys(names) if n in self.functions]

    def reach(self, name: str, seen: set[str]) -> list[tuple[str, ...]] | None:
        """Chain [(function, file:line)…, (kind, call, file:line)] from ``name`` to a loop call."""
        if name in seen:
            return None
        seen.add(name)
        f, fn = self.functions[name]
        hit = self.direct(f, [fn.body])
        here = (f"{name}()", f.where(fn))
        if hit is not None:
            return [here, (hit[0], hit[1], hit[2])]
        for callee in self.calls([fn.body]):
            chain = self.reach(callee, seen)
            if chain is not None:
                return [here, *chain]
        return None


def _describe(origin: str, chain: list[tuple[str, ...]]) -> Loop:
    *functions, (kind, call, where) = chain
    path = " → ".join(f"{name} ({at})" for name, at in functions)
    what = "runs the loop" if kind == "trainer" else "calls"
    return Loop(kind="trainer" if kind == "trainer" else origin, why=f"{origin_text(origin)} {path} {what} {call}",
                where=where)


def origin_text(origin: str) -> str:
    return {"function_from_module": "called from module level (no __main__ guard):",
            "main_guard": "behind the __main__ guard:"}[origin]


def find_loop(entry: tuple[str, MetadataWrapper], imported: Sequence[tuple[str, MetadataWrapper]] = ()) -> Loop:
    """The loop the entry script reaches when it is run, and how."""
    files = [ParsedFile(*entry), *(ParsedFile(*i) for i in imported)]
    graph = _Graph(files)
    main = files[0]
    body = list(main.module.body)
    top = [s for s in body if not isinstance(s, (cst.FunctionDef, cst.ClassDef)) and not is_main_guard(s)]
    guards = [s for s in body if is_main_guard(s)]
    for nodes, origin in ((top, "function_from_module"), ([g.body for g in guards], "main_guard")):
        hit = graph.direct(main, nodes)
        if hit is not None:
            kind, call, where = hit
            if kind == "trainer":
                place = "at module level" if origin == "function_from_module" else "in the __main__ block"
                return Loop("trainer", f"{call} {place} ({where}) runs the loop", where)
            if origin == "function_from_module":
                return Loop("module_loop", f"the loop runs at module level: {call} at {where}", where)
            return Loop("main_guard", f"the loop runs in the __main__ block: {call} at {where}", where)
        for name in graph.calls(nodes):
            chain = graph.reach(name, set())
            if chain is not None:
                return _describe(origin, chain)
    return Loop("none", f"no .backward() or Trainer train()/fit() is reached from {main.rel}'s module level "
                        "or __main__ block")
