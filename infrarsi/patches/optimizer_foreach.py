"""A for-loop ``torch.optim`` optimizer -> the multi-tensor ``foreach=True`` implementation.

On CPU torch picks the for-loop implementation (one small kernel per parameter and per update
term); ``foreach=True`` batches them over all parameters. Applies to a constructor call that sets
no implementation or sets ``foreach=False``/``None``. A call whose implementation comes from an
expression or ``**kwargs`` (a knob, such as nanoGPT's ``configure_optimizers``) is left to the
search, which tunes that knob instead.
"""

from __future__ import annotations

import libcst as cst

from infrarsi.patches._cst import code, has_star_args
from infrarsi.patches._optim import OPTIMIZERS, imported_from_optim, keyword, optimizer_class, with_keyword
from infrarsi.patches.base import Patch, PatchCodemod
from infrarsi.priors.builtin import OPTIMIZER


class ForeachCodemod(PatchCodemod):
    DESCRIPTION = "Use the foreach (multi-tensor) implementation of a torch.optim optimizer."

    def visit_Module(self, node: cst.Module) -> None:
        self.bare = imported_from_optim(node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        cls = optimizer_class(original_node, self.bare)
        if cls is None or has_star_args(original_node):
            return updated_node
        foreach, fused = keyword(original_node, "foreach"), keyword(original_node, "fused")
        if fused is not None and code(fused.value) != "False":
            return updated_node
        if foreach is not None and code(foreach.value) not in ("False", "None"):
            return updated_node
        self.mark(original_node, f"{cls} runs its for-loop implementation: foreach=True batches the update")
        return with_keyword(updated_node, "foreach", "True")


class OptimizerForeach(Patch):
    name = "optimizer_foreach"
    DESCRIPTION = ForeachCodemod.DESCRIPTION
    numerics_by_design = False
    prior = OPTIMIZER.beliefs("foreach")
    needles = ("optim",)
    requires = (tuple(sorted(OPTIMIZERS)),)
    codemod = ForeachCodemod
