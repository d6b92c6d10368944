"""Let float32 matmuls use TensorFloat-32 on CUDA: ``torch.set_float32_matmul_precision("high")``.

TF32 keeps float32's range with a 10-bit mantissa in the tensor cores: several times the matmul
throughput on Ampere and later, with results that differ from float32 by design, so trials judge
it on the contract's looser numerics tolerance. It has no effect on CPU and is skipped there.
The setting goes after the imports of the file that runs the training loop (the one calling
``.backward()``); a file that already chooses a precision is left alone.
"""

from __future__ import annotations

import libcst as cst

from infrarsi.patches._cst import after_imports, imports_name
from infrarsi.patches.base import Patch, PatchCodemod
from infrarsi.priors.builtin import DTYPE, Belief


class Tf32Codemod(PatchCodemod):
    DESCRIPTION = "Allow TF32 tensor-core matmuls for float32 on CUDA."

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        source = original_node.code
        if ".backward(" not in source or not imports_name(original_node, "torch"):
            return updated_node
        if "allow_tf32" in source or "set_float32_matmul_precision" in source or "fp32_precision" in source:
            return updated_node
        index = after_imports(original_node)
        line = cst.parse_statement(
            'torch.set_float32_matmul_precision("high")  # TF32 tensor cores for float32 matmuls (added by InfraRSI)\n'
        ).with_changes(leading_lines=[cst.EmptyLine()])
        anchor = original_node.body[index - 1] if index else original_node.body[0]
        self.mark(anchor, "float32 matmuls run at full precision: allow TF32 on CUDA")
        return updated_node.with_changes(body=[*updated_node.body[:index], line, *updated_node.body[index:]])


class Tf32Matmul(Patch):
    name = "tf32_matmul"
    DESCRIPTION = Tf32Codemod.DESCRIPTION
    numerics_by_design = True
    gpu_only = True
    prior = {"cpu": Belief(DTYPE.cpu["tf32"], "TF32 is a CUDA tensor-core mode; CPU matmuls are unaffected"),
             "cuda": DTYPE.beliefs("tf32")["cuda"]}
    absent = ("allow_tf32", "set_float32_matmul_precision", "fp32_precision")
    reach = "module"
    needles = (".backward(",)
    codemod = Tf32Codemod
