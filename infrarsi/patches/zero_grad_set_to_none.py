"""``zero_grad(set_to_none=False)`` -> ``zero_grad(set_to_none=True)``.

Zeroing writes every gradient buffer each step and keeps it allocated between the optimizer step
and the next backward; setting the gradients to None skips the writes and lets backward allocate
them afresh. A bare ``zero_grad()`` already does this (the default since torch 2.0), so only an
explicit ``False`` (keyword or positional) is a site.
"""

from __future__ import annotations

import libcst as cst

from infrarsi.patches._cst import arg, code
from infrarsi.patches.base import Patch, PatchCodemod
from infrarsi.priors.builtin import ZERO_GRAD


class ZeroGradCodemod(PatchCodemod):
    DESCRIPTION = "Set gradients to None instead of zeroing them."

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        func = original_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "zero_grad"):
            return updated_node
        value = arg(original_node, 0, "set_to_none")
        if value is None or code(value) != "False":
            return updated_node
        self.mark(original_node, "zero_grad(set_to_none=False) zeroes every gradient buffer: set them to None")
        index = next(i for i, a in enumerate(original_node.args) if a.value is value)
        args = list(updated_node.args)
        args[index] = args[index].with_changes(value=cst.Name("True"))
        return updated_node.with_changes(args=args)


class ZeroGradSetToNone(Patch):
    name = "zero_grad_set_to_none"
    DESCRIPTION = ZeroGradCodemod.DESCRIPTION
    numerics_by_design = False
    prior = ZERO_GRAD.beliefs("none")
    needles = ("zero_grad",)
    codemod = ZeroGradCodemod
