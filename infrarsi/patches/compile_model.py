"""``model = torch.compile(model)`` behind a knob.

The model is the object whose ``.parameters()`` feed a ``torch.optim`` constructor (or whose
``configure_optimizers`` is called). The compile goes in the same block, after the last statement
before the training loop that builds or moves the model (``model = GPT(...)``, ``model.to(device)``),
so it runs before a DDP wrap that follows, as nanoGPT does. Compilation costs start-up time
(33-42 s cold on the 2-core CPU) that the search amortizes over the job's planned steps. The knob
is an argparse ``--compile_model/--no-compile_model`` flag or a module global (see ``_gate``); a
script that already calls ``torch.compile`` or has a compile knob is left to that knob.
"""

from __future__ import annotations

import libcst as cst

from infrarsi.patches._cst import dotted
from infrarsi.patches._gate import add_gate
from infrarsi.patches._optim import OPTIMIZERS
from infrarsi.patches.base import Patch, PatchCodemod
from infrarsi.priors.builtin import COMPILE

KNOB = "compile_model"


def _model_name(stmt: cst.BaseStatement) -> str | None:
    """The model an optimizer statement is built for: ``X`` in ``X.parameters()`` / ``X.configure_optimizers``."""
    found: list[str] = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            name = dotted(node.func) or ""
            owner, _, method = name.rpartition(".")
            if method == "configure_optimizers" and owner and "." not in owner:
                found.append(owner)
            if method in OPTIMIZERS:
                for a in node.args:
                    inner = a.value
                    if isinstance(inner, cst.Call):
                        target = dotted(inner.func) or ""
                        if target.endswith(".parameters") and "." not in target[: -len(".parameters")]:
                            found.append(target[: -len(".parameters")])

    stmt.visit(_Find())
    return found[0] if found else None


def _builds(stmt: cst.BaseStatement, model: str) -> bool:
    """``model = ...`` or ``model.to(...)`` / ``model.cuda()`` as a whole statement."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        return False
    small = stmt.body[0]
    if isinstance(small, cst.Assign):
        return any(dotted(t.target) == model for t in small.targets)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        return dotted(small.value.func) in (f"{model}.to", f"{model}.cuda")
    return False


class CompileCodemod(PatchCodemod):
    DESCRIPTION = "Compile the model with torch.compile, behind a knob."

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if "torch.compile(" in original_node.code:
            # the script already compiles (behind its own switch or not): nothing to add
            return updated_node
        module = updated_node
        for stmt in original_node.body:
            model = _model_name(stmt)
            if model is None:
                continue
            loop = next((k for k, s in enumerate(original_node.body) if isinstance(s, (cst.For, cst.While))), len(original_node.body))
            builds = [k for k in range(min(loop, len(original_node.body))) if _builds(original_node.body[k], model)]
            if not builds:
                return updated_node
            at = builds[-1]
            self.mark(original_node.body[at], f"{model} runs eagerly: torch.compile it (behind --{KNOB})")
            module, gate, knob, gate_at = add_gate(module, self.context.filename or "<source>", KNOB, "compile",
                                                   "torch.compile the model")
            self.knobs.append(knob)
            shift = 1 if gate_at <= at else 0
            compiled = cst.parse_statement(f"if {gate}:\n    {model} = torch.compile({model})\n")
            body = list(module.body)
            body.insert(at + 1 + shift, compiled)
            if knob.flag_style == "bool_optional":
                self.add_needed_import("argparse")
            self.add_needed_import("torch")
            return module.with_changes(body=body)
        return updated_node


class CompileModel(Patch):
    name = "compile_model"
    DESCRIPTION = CompileCodemod.DESCRIPTION
    numerics_by_design = False
    gate_knob = KNOB
    gate_role = "compile"
    prior = COMPILE.beliefs("on")
    absent = ("torch.compile(",)
    reach = "top"  # it reads the module's own statements only: a definition holds no site
    needles = (".parameters(", "configure_optimizers")
    codemod = CompileCodemod
