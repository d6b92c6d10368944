"""Pinned host memory and asynchronous host-to-device copies (CUDA only).

Two spellings are sites: a ``DataLoader(...)`` without ``pin_memory`` (or with ``False``) gets
``pin_memory=True``; inside a batch-making function (its name contains ``batch``), a copy
``t.to(device)`` / ``t.cuda()`` becomes ``t.pin_memory().to(device, non_blocking=True)``, so the
copy overlaps the next step's compute. Pinning needs CUDA, which is why the patch is declared
GPU-only and skipped on CPU; functions that already pin are left alone.
"""

from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodContext

from infrarsi.patches._cst import code, dotted, has_star_args
from infrarsi.patches._optim import keyword, with_keyword
from infrarsi.patches.base import Patch, PatchCodemod
from infrarsi.priors.builtin import Belief, Effect


def _device_arg(call: cst.Call) -> bool:
    """``.to(device)`` with one positional argument that names a device (not a dtype)."""
    if len(call.args) != 1 or call.args[0].keyword is not None:
        return False
    text = code(call.args[0].value)
    return "device" in text.lower() or text.strip("'\"").startswith("cuda")


class PinnedCodemod(PatchCodemod):
    DESCRIPTION = "Pin host batches and copy them to the GPU without blocking."

    def __init__(self, context: CodemodContext) -> None:
        super().__init__(context)
        self.batch_functions = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.batch_functions += "batch" in node.name.value.lower() and "pin_memory" not in code(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self.batch_functions -= "batch" in original_node.name.value.lower() and "pin_memory" not in code(original_node)
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = dotted(original_node.func) or ""
        if name.rpartition(".")[2] == "DataLoader" and not has_star_args(original_node):
            pinned = keyword(original_node, "pin_memory")
            if pinned is None or code(pinned.value) == "False":
                self.mark(original_node, "DataLoader batches are pageable: pin_memory=True lets copies run async")
                return with_keyword(updated_node, "pin_memory", "True")
            return updated_node
        func = original_node.func
        if not (self.batch_functions and isinstance(func, cst.Attribute)):
            return updated_node
        tensor = cst.ensure_type(updated_node.func, cst.Attribute).value  # still the attribute it was
        if func.attr.value == "to" and _device_arg(original_node):
            copy = f"{code(tensor)}.pin_memory().to({code(original_node.args[0].value)}, non_blocking=True)"
        elif func.attr.value == "cuda" and not original_node.args:
            copy = f"{code(tensor)}.pin_memory().cuda(non_blocking=True)"
        else:
            return updated_node
        self.mark(original_node, "blocking copy from pageable memory: pin it and copy with non_blocking=True")
        return cst.parse_expression(copy)


class PinnedMemory(Patch):
    name = "pinned_memory"
    DESCRIPTION = PinnedCodemod.DESCRIPTION
    numerics_by_design = False
    gpu_only = True
    prior = {
        "cpu": Belief(Effect(0.0, 0.02, 0.0, 0.03),
                      "pinned host memory only speeds host-to-device copies; no device on CPU"),
        "cuda": Belief(Effect(-0.02, 0.04, 0.0, 0.03),
                       "PyTorch DataLoader docs and CUDA best-practices guide: page-locked buffers make "
                       "host-to-device copies faster and asynchronous"),
    }
    needles = ("DataLoader", ".to(", ".cuda(")
    codemod = PinnedCodemod
