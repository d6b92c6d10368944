"""Mixed precision: the forward and the loss under ``torch.autocast(..., dtype=torch.bfloat16)``.

Matmuls and convolutions then run in bfloat16 where the hardware has units for it (tensor cores
since Ampere; AMX or AVX512-BF16 on a CPU: several times float32's rate), with float32's range, so
no loss scaling is needed; the weights, the optimizer and the backward's accumulation stay float32.
Results differ from float32 by design: trials judge the patch on the contract's numerics tolerance.

Two forms are rewritten, in a file that calls ``<loss>.backward()`` and imports torch:

- a script with no autocast: the statements before ``<loss>.backward()`` in its block that compute
  the loss (followed back through the names each one reads, stopping at the first that computes
  none of them) go under ``with torch.autocast(...)``, on the device the job runs on;
- a script that switches autocast off by device (``nullcontext() if device_type == "cpu" else
  torch.autocast(...)``): its autocast is used on every device (the dtype is still the script's).

A script that autocasts in any other way is left alone. The patch is tried only where bfloat16
matmuls are faster than float32 ones (``refusal``): measured on a CPU, a CUDA device that supports
bfloat16 otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst

from infrarsi.patches._cst import DEVICES, code, dotted, imports_name, leading_lines, names_in, walk
from infrarsi.patches.base import Patch, PatchCodemod
from infrarsi.priors.builtin import DTYPE, Belief

AUTOCAST = ('torch.autocast(device_type="cuda" if torch.cuda.is_available() else "cpu", dtype=torch.bfloat16)')
MIN_GAIN = 1.3
"""bfloat16 matmuls must run at least this many times float32's rate for the patch to be tried."""


def _backward_of(stmt: cst.BaseStatement) -> str | None:
    """``loss`` when ``stmt`` is the line ``loss.backward(...)``."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return None
    call = stmt.body[0].value
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward" \
            and isinstance(call.func.value, cst.Name):
        return call.func.value.value
    return None


def _bound(stmt: cst.BaseStatement) -> tuple[set[str], cst.CSTNode] | None:
    """``(names bound, value)`` of a line that is one assignment, else None."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Assign):
        return set().union(*(names_in(t.target) for t in small.targets)), small.value
    if isinstance(small, (cst.AugAssign, cst.AnnAssign)) and small.value is not None:
        return names_in(small.target), small.value
    return None


def _loss_statements(body: list[cst.BaseStatement], backward: int, loss: str) -> int:
    """The index of the first statement, before ``body[backward]``, of the run that computes ``loss``
    (``backward`` itself when none does)."""
    needed, start = {loss}, backward
    for i in range(backward - 1, -1, -1):
        bound = _bound(body[i])
        if bound is None or not bound[0] & needed:
            break
        needed |= names_in(bound[1])
        start = i
    return start


def _calls(statements: list[cst.BaseStatement]) -> bool:
    return any(isinstance(n, cst.Call) for s in statements for n in walk(s))


class AutocastCodemod(PatchCodemod):
    DESCRIPTION = "Run the forward and the loss in bfloat16 mixed precision (torch.autocast)."

    def visit_Module(self, node: cst.Module) -> bool:
        self.has_autocast = "autocast" in names_in(node)  # in code, not in a comment or docstring
        return imports_name(node, "torch") and ".backward(" in node.code

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        if self.has_autocast:
            return updated_node
        original, body = list(original_node.body), list(updated_node.body)
        for i in range(len(original) - 1, -1, -1):
            loss = _backward_of(original[i])
            start = _loss_statements(original, i, loss) if loss else i
            if start == i or not _calls(original[start:i]):
                continue
            self.mark(original[start], f"{loss} is computed in float32: autocast runs its matmuls in bfloat16",
                      end=original[i - 1])
            inner = [s.with_changes(leading_lines=[]) if j == 0 else s for j, s in enumerate(body[start:i])]
            block = cst.ensure_type(cst.parse_statement(f"with {AUTOCAST}:\n    pass\n"), cst.With)
            block = block.with_changes(leading_lines=leading_lines(body[start]),
                                       body=block.body.with_changes(body=inner))
            body[start:i] = [block]
        return updated_node.with_changes(body=body)

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        branches = (original_node.body, original_node.orelse)
        names = [dotted(b.func) if isinstance(b, cst.Call) else None for b in branches]
        if not all(names) or sorted(n.rsplit(".", 1)[-1] for n in names if n) != ["autocast", "nullcontext"]:
            return updated_node
        if not DEVICES & {n.evaluated_value for n in walk(original_node.test) if isinstance(n, cst.SimpleString)}:
            return updated_node  # the script's own precision switch (a dtype setting): the search's knob
        keep = updated_node.body if names[0] and names[0].endswith("autocast") else updated_node.orelse
        self.mark(original_node, f"autocast is switched off when {code(original_node.test)}: use it on every device")
        return keep.with_changes(lpar=[], rpar=[])


def refusal(flags: set[str], bf16_rate: float | None, fp32_rate: float | None) -> str | None:
    """Why bfloat16 mixed precision is not tried on this CPU (None: it is), from its /proc/cpuinfo
    flags and the measured matmul rates of both dtypes."""
    from infrarsi import hardware  # imports torch, which the editor's readers of the registry never load

    units = hardware.CPU_DTYPE_UNITS["bf16"]
    if not flags & set(units):
        return (f"this CPU has no bfloat16 units ({' or '.join(units)} absent from /proc/cpuinfo): torch would "
                "convert each bfloat16 matmul to float32 and back, slower than float32")
    if bf16_rate is None or fp32_rate is None:
        return "the bfloat16 and float32 matmul rates of this CPU could not be measured"
    if bf16_rate < MIN_GAIN * fp32_rate:
        return (f"bfloat16 matmuls run {bf16_rate / 1e9:,.0f} GFLOP/s here against {fp32_rate / 1e9:,.0f} in "
                f"float32 (measured): not {MIN_GAIN}x faster, so mixed precision would change the numerics for "
                "little or no speed")
    return None


class AutocastBf16(Patch):
    name = "autocast_bf16"
    DESCRIPTION = AutocastCodemod.DESCRIPTION
    numerics_by_design = True
    prior = {"cpu": Belief(DTYPE.cpu["bf16"],
                           DTYPE.source_cpu + " (the patch is tried only where bf16 matmuls measured faster)"),
             "cuda": DTYPE.beliefs("bf16")["cuda"]}
    needles = (".backward(",)
    requires = (("torch",),)
    # A site lies in one block. The run sees the whole file, so an autocast anywhere in it holds the
    # patch back; the editor, analysing one definition with the file's imports, sees that
    # definition's (an edit elsewhere re-analyses nothing here).
    reach = "definition"
    codemod = AutocastCodemod

    def refusal(self, device: str, sources: Mapping[str, str]) -> str | None:
        from infrarsi import hardware  # imports torch (see ``refusal`` above)

        if device == "cuda":
            import torch

            return None if torch.cuda.is_bf16_supported() else "this CUDA device does not support bfloat16"
        flags = hardware.cpu_flags()
        if not flags & set(hardware.CPU_DTYPE_UNITS["bf16"]):
            return refusal(flags, None, None)
        rates = [hardware.peak_flops("cpu", dtype).value for dtype in ("bf16", "fp32")]
        return refusal(flags, *rates)
