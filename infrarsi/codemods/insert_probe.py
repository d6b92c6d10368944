"""Insert the InfraRSI probe into a training loop that lacks it.

The training loop is the one ``infrarsi.knobs.loop.training_loop`` finds: the innermost
``for``/``while`` loop that contains both a ``.backward()`` call and an optimizer step
(``optimizer.step()``, ``opt.step()``, ``scaler.step(optimizer)``). The probe call goes right
after the optimizer step, so a ``break`` or ``continue`` later in the body cannot
skip it. The loss is the value ``.backward()`` was called on; with gradient accumulation (the
backward inside an inner loop) the codemod sums it over the micro-batches, which is the step's
mean loss when each micro-batch loss is divided by the number of micro-batches, as is usual.
Tokens are the ``numel()`` of the model's input (the first name passed to the call that computed
the loss), times ``WORLD_SIZE`` for scripts run under torchrun.

    from infrarsi.codemods.insert_probe import insert_probe, probe_diff
    edit = insert_probe(source, distributed=False)   # ProbeEdit(status, code, reason)
    print(probe_diff(source, "train.py"))           # the unified diff, nothing written
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TypeVar

import libcst as cst
from libcst.codemod import (
    CodemodContext,
    SkipFile,
    TransformFailure,
    TransformSkip,
    TransformSuccess,
    VisitorBasedCodemodCommand,
    transform_module,
)
from libcst.codemod.visitors import AddImportsVisitor

from infrarsi.knobs.loop import is_optimizer_step, training_loop
from infrarsi.knobs.source import dotted, walk


def _loss_expr(backward: cst.Call) -> cst.BaseExpression:
    """What ``.backward()`` was called on; ``scaler.scale(loss).backward()`` means ``loss``."""
    target = cst.ensure_type(backward.func, cst.Attribute).value  # ``<target>.backward``
    if isinstance(target, cst.Call) and dotted(target.func).endswith("scale") and target.args:
        return target.args[0].value
    return target


def _input_name(module: cst.Module, loop: cst.CSTNode, loss: cst.BaseExpression) -> str | None:
    """The model input: following the assignments the loss comes from, the first name passed as first
    argument to a call, preferring calls that look like the model (``model(x)``, ``self.net(x)``)."""
    names = {n.value for n in walk(loss) if isinstance(n, cst.Name)}
    found: list[tuple[str, str]] = []
    seen: set[int] = set()
    grew = True
    while grew:
        grew = False
        for node in walk(loop):
            if not isinstance(node, cst.Assign) or id(node) in seen:
                continue
            targets = {n.value for t in node.targets for n in walk(t.target) if isinstance(n, cst.Name)}
            if not targets & names:
                continue
            seen.add(id(node))
            grew = True
            for call in walk(node.value):
                if isinstance(call, cst.Call) and call.args and isinstance(call.args[0].value, cst.Name):
                    found.append((module.code_for_node(call.func).lower(), call.args[0].value.value))
            names |= {n.value for n in walk(node.value) if isinstance(n, cst.Name)}
    model_like = [name for func, name in found if any(w in func for w in ("model", "net", "module", "forward"))]
    candidates = model_like or [name for _, name in found]
    return candidates[0] if candidates else None


_Loop = TypeVar("_Loop", cst.For, cst.While)


def _stmt(code: str) -> cst.SimpleStatementLine:
    return cst.ensure_type(cst.parse_statement(code), cst.SimpleStatementLine)


class InsertProbeCommand(VisitorBasedCodemodCommand):
    DESCRIPTION = (
        "Insert `from infrarsi import probe` and `probe.step(loss=…, tokens=…)` after the optimizer "
        "step of the training loop."
    )

    def __init__(self, context: CodemodContext, distributed: bool = False) -> None:
        super().__init__(context)
        self.distributed = distributed
        self.loop: cst.For | cst.While | None = None
        self.backward_stmt: cst.SimpleStatementLine | None = None
        self.accumulates = False
        self.loss_code = ""
        self.tokens_code = ""

    def visit_Module(self, node: cst.Module) -> None:
        if "probe.step(" in node.code:
            raise SkipFile("the probe is already called (probe.step found)")
        found = training_loop(node)
        if found is None:
            raise SkipFile("no training loop: no for/while loop calls both .backward() and an optimizer step")
        self.loop = found.node
        backward = found.backward
        loss = _loss_expr(backward)
        name = _input_name(node, self.loop, loss)
        if name is None:
            raise SkipFile("cannot tell the model input (no call with a name as first argument computes the loss)")
        self.loss_code = node.code_for_node(loss)
        if not isinstance(loss, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
            self.loss_code = f"({self.loss_code})"
        world = ' * int(os.environ.get("WORLD_SIZE", "1"))' if self.distributed else ""
        self.tokens_code = f"{name}.numel(){world}"
        self.accumulates = found.accumulates
        self.backward_stmt = next(
            s for s in walk(self.loop) if isinstance(s, cst.SimpleStatementLine) and backward in walk(s)
        )
        if self.distributed:
            AddImportsVisitor.add_needed_import(self.context, "os")
        AddImportsVisitor.add_needed_import(self.context, "infrarsi", "probe")

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
                                  ) -> cst.SimpleStatementLine | cst.FlattenSentinel[cst.SimpleStatementLine]:
        if self.accumulates and original is self.backward_stmt:
            return cst.FlattenSentinel([
                updated,
                _stmt(f"probe_loss += {self.loss_code}.item()\n"),
                _stmt(f"probe_tokens += {self.tokens_code}\n"),
            ])
        return updated

    def _probe_loop(self, original: _Loop, updated: _Loop) -> _Loop:
        if original is not self.loop or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        body = list(updated.body.body)
        at = next(i for i, s in enumerate(original.body.body) if any(is_optimizer_step(n) for n in walk(s))) + 1
        if self.accumulates:
            call = _stmt("probe.step(loss=probe_loss, tokens=probe_tokens)\n")
            body.insert(at, call)
            body.insert(0, _stmt("probe_loss, probe_tokens = 0.0, 0\n"))
        else:
            body.insert(at, _stmt(f"probe.step(loss={self.loss_code}.item(), tokens={self.tokens_code})\n"))
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.For:
        return self._probe_loop(original, updated)

    def leave_While(self, original: cst.While, updated: cst.While) -> cst.While:
        return self._probe_loop(original, updated)


@dataclass(frozen=True, slots=True)
class ProbeEdit:
    status: str
    """inserted | skipped (already present, no loop found…) | failed (the codemod raised)."""
    code: str
    """The new source (the old one unless inserted)."""
    reason: str = ""


def insert_probe(source: str, *, distributed: bool = False) -> ProbeEdit:
    """The source with the probe inserted, as a value: never raises for code it cannot handle."""
    result = transform_module(InsertProbeCommand(CodemodContext(), distributed=distributed), source)
    if isinstance(result, TransformSuccess):
        return ProbeEdit("inserted", result.code)
    if isinstance(result, TransformSkip):
        return ProbeEdit("skipped", source, result.skip_description)
    if isinstance(result, TransformFailure):
        return ProbeEdit("failed", source, str(result.error))
    return ProbeEdit("failed", source, "the codemod exited early")


def probe_diff(source: str, path: str, *, distributed: bool = False) -> tuple[ProbeEdit, str]:
    """The edit and its unified diff against ``path`` (empty unless inserted); writes nothing."""
    edit = insert_probe(source, distributed=distributed)
    if edit.status != "inserted":
        return edit, ""
    diff = difflib.unified_diff(
        source.splitlines(keepends=True), edit.code.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return edit, "".join(diff)
