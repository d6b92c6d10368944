"""Activation checkpointing of the transformer blocks, behind a knob.

Recognised: in a module's ``forward``, a loop over a ModuleList attribute whose body is one call
of the block that reassigns the hidden state (``for block in self.h: x = block(x)``). The call
becomes ``torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)`` when the knob is on:
each block's activations are recomputed in backward instead of stored, trading time for memory.
Non-reentrant checkpointing restores the RNG state, so dropout draws the same masks and the loss
is unchanged. The knob is a module global ``activation_checkpointing = True`` (see ``_gate``),
reported as a source-level contract knob; a script whose contract already has an
activation-checkpointing knob is tuned through that knob instead.
"""

from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodContext

from infrarsi.patches._cst import code, dotted
from infrarsi.patches._gate import add_gate
from infrarsi.patches.base import Patch, PatchCodemod
from infrarsi.priors.builtin import CHECKPOINTING

KNOB = "activation_checkpointing"


def _block_call(loop: cst.For) -> tuple[str, cst.Call] | None:
    """``(hidden, call)`` for a loop body that is exactly ``hidden = block(hidden, ...)``."""
    if not isinstance(loop.target, cst.Name) or loop.orelse is not None:
        return None
    it = dotted(loop.iter)
    if not (it and it.startswith("self.")):
        return None
    body = loop.body.body
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return None
    small = body[0].body[0]
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
        return None
    call = small.value
    hidden = small.targets[0].target.value
    if not (isinstance(call, cst.Call) and dotted(call.func) == loop.target.value):
        return None
    if not any(a.keyword is None and not a.star and dotted(a.value) == hidden for a in call.args):
        return None
    return hidden, call


class CheckpointCodemod(PatchCodemod):
    DESCRIPTION = "Recompute each transformer block in backward (activation checkpointing), behind a knob."

    def __init__(self, context: CodemodContext) -> None:
        super().__init__(context)
        self.in_forward = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.in_forward += node.name.value == "forward"

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self.in_forward -= original_node.name.value == "forward"
        return updated_node

    def leave_For(self, original_node: cst.For, updated_node: cst.For) -> cst.For:
        found = _block_call(original_node) if self.in_forward else None
        if found is None:
            return updated_node
        hidden, call = found
        block = cst.ensure_type(original_node.target, cst.Name).value  # _block_call found a name there
        args = ", ".join(code(a).rstrip(", ") for a in call.args)
        gated = cst.ensure_type(cst.parse_statement(
            f"if {KNOB}:\n"
            f"    {hidden} = torch.utils.checkpoint.checkpoint({block}, {args}, use_reentrant=False)\n"
            f"else:\n"
            f"    pass\n"
        ), cst.If)
        # the original call line, comment and all, is the else branch
        original_line = updated_node.body.body[0].with_changes(leading_lines=[])
        orelse = cst.ensure_type(gated.orelse, cst.Else)
        gated = gated.with_changes(orelse=orelse.with_changes(body=orelse.body.with_changes(body=[original_line])))
        self.mark(original_node, f"blocks of {dotted(original_node.iter)} keep their activations: checkpoint them")
        self.add_needed_import("torch.utils.checkpoint")
        return updated_node.with_changes(body=updated_node.body.with_changes(body=[gated]))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if not self.found:
            return updated_node
        path = self.context.filename or "<source>"
        module, _, knob, _ = add_gate(updated_node, path, KNOB, "activation_checkpointing",
                                   "recompute each block in backward instead of storing its activations")
        self.knobs.append(knob)
        return module


class ActivationCheckpointing(Patch):
    name = "activation_checkpointing"
    DESCRIPTION = CheckpointCodemod.DESCRIPTION
    numerics_by_design = False
    gate_knob = KNOB
    gate_role = "activation_checkpointing"
    prior = CHECKPOINTING.beliefs("on")
    needles = ("for ",)
    requires = (("forward",),)
    codemod = CheckpointCodemod
