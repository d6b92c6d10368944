"""A for-loop or foreach ``torch.optim`` optimizer -> the fused implementation (``fused=True``).

Fused kernels exist for Adam, AdamW, SGD and Adagrad on CPU and CUDA (torch >= 2.4). They do the
same arithmetic in one kernel per parameter group, so results agree to float rounding, not bit
for bit. ``foreach`` is removed: torch refuses both at once. Calls whose implementation comes
from an expression or ``**kwargs`` are left to the search's knob, as for ``optimizer_foreach``;
but a script that switches fused off by device (``use_fused = fused_available and device_type ==
"cuda"``) gets the switch without its device test, since the fused kernels run on CPU too.
"""

from __future__ import annotations

import math

import libcst as cst

from infrarsi.patches._cst import DEVICES, code, has_star_args
from infrarsi.patches._optim import (
    OPTIMIZERS,
    imported_from_optim,
    keyword,
    optimizer_class,
    with_keyword,
    without_keyword,
)
from infrarsi.patches.base import Patch, PatchCodemod
from infrarsi.priors.builtin import Belief, Effect

FUSED = {"Adam", "AdamW", "SGD", "Adagrad"}


class FusedCodemod(PatchCodemod):
    DESCRIPTION = "Use the fused implementation of Adam, AdamW, SGD or Adagrad."

    def visit_Module(self, node: cst.Module) -> None:
        self.bare = imported_from_optim(node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        cls = optimizer_class(original_node, self.bare)
        if cls not in FUSED or has_star_args(original_node):
            return updated_node
        foreach, fused = keyword(original_node, "foreach"), keyword(original_node, "fused")
        if fused is not None and code(fused.value) not in ("False", "None"):
            return updated_node
        if foreach is not None and code(foreach.value) not in ("False", "None", "True"):
            return updated_node
        self.mark(original_node, f"{cls} has a fused implementation: fused=True updates each group in one kernel")
        return with_keyword(without_keyword(updated_node, "foreach"), "fused", "True")

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        targets = [t.target for t in original_node.targets]
        value = original_node.value
        if len(targets) != 1 or not isinstance(targets[0], cst.Name) or "fused" not in targets[0].value.lower() \
                or not isinstance(value, cst.BooleanOperation) or not isinstance(value.operator, cst.And):
            return updated_node
        tests = [side for side in (value.left, value.right) if _device_test(side)]
        if len(tests) != 1:
            return updated_node
        kept = value.right if tests[0] is value.left else value.left
        self.mark(original_node, f"fused is switched off unless {code(tests[0])}: torch's fused kernels run on CPU too")
        return updated_node.with_changes(value=kept.with_changes(lpar=[], rpar=[]))


def _device_test(node: cst.BaseExpression) -> bool:
    """``device_type == "cuda"`` and the like: a comparison with a device's name."""
    return isinstance(node, cst.Comparison) and any(
        isinstance(c.comparator, cst.SimpleString) and c.comparator.evaluated_value in DEVICES for c in node.comparisons)


class OptimizerFused(Patch):
    name = "optimizer_fused"
    DESCRIPTION = FusedCodemod.DESCRIPTION
    numerics_by_design = False
    prior = {
        # The sds are those of a 0.4 and a 0.5 confidence (0.05 + 0.45 * (1 - confidence)).
        "cpu": Belief(Effect(math.log(0.97), 0.32, 0.0, 0.32), "declared by patch optimizer_fused"),
        "cuda": Belief(Effect(math.log(0.9), 0.275, 0.0, 0.275), "declared by patch optimizer_fused"),
    }
    needles = ("optim",)
    requires = (tuple(sorted(OPTIMIZERS)),)
    codemod = FusedCodemod
