"""Convolutional models in the channels-last memory format: ``model = model.to(memory_format=torch.channels_last)``.

Convolutions run fastest on NHWC data (oneDNN on a CPU, tensor cores on CUDA): with the weights in
channels-last, each convolution picks the NHWC kernel and its output stays NHWC, instead of
reordering every activation to and from NCHW around each kernel. Kernels and summation order
change with the format, so the patch changes float results by design and trials judge it on the
numerics tolerance.

The model is the name the file hands to an optimizer (``<model>.parameters()``): the line goes
after each assignment that builds it (``model = Net().to(device)``), not after one that wraps or
moves a model already built (``model = DataParallel(model)``: the format travels with the weights).
Only a file that both defines convolutions and runs the training loop is rewritten, and one that
already chooses a memory format is left alone.
"""

from __future__ import annotations

import libcst as cst

from infrarsi.patches._cst import imports_name, names_in, single_assign, walk
from infrarsi.patches.base import Patch, PatchCodemod
from infrarsi.priors.builtin import Belief, Effect


def _trained_models(module: cst.Module) -> set[str]:
    """The names whose ``.parameters()`` the file reads: the models its optimizers train."""
    return {n.func.value.value for n in walk(module) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
            and n.func.attr.value == "parameters" and isinstance(n.func.value, cst.Name)}


def _chooses_a_format(module: cst.Module) -> bool:
    """Whether the code (not a comment or a string) names a memory format already."""
    formats = {"channels_last", "channels_last_3d", "memory_format"}
    return "memory_format" in names_in(module) or any(
        isinstance(n, cst.Attribute) and n.attr.value in formats for n in walk(module))


class ChannelsLastCodemod(PatchCodemod):
    DESCRIPTION = "Keep a convolutional model's weights and activations in channels-last (NHWC) memory format."

    def visit_Module(self, node: cst.Module) -> bool:
        self.models = _trained_models(node)
        self.active = bool(self.models) and imports_name(node, "torch") and ".backward(" in node.code \
            and not _chooses_a_format(node)
        return self.active

    def _rewrite(self, original: list[cst.BaseStatement], body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        for stmt, new in zip(original, body, strict=True):
            out.append(new)
            assigned = single_assign(stmt)
            if assigned is None or assigned[0] not in self.models:
                continue
            model, value = assigned
            if model in names_in(value) or not isinstance(value, cst.Call):
                continue  # wraps or moves a model already built, or is not a construction
            self.mark(stmt, f"{model} convolves in NCHW: channels-last runs its convolutions as NHWC kernels")
            out.append(cst.parse_statement(
                f"{model} = {model}.to(memory_format=torch.channels_last)  # NHWC convolutions (added by InfraRSI)\n"))
        return out

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated_node.with_changes(body=self._rewrite(list(original_node.body), list(updated_node.body)))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if not self.active:
            return updated_node
        return updated_node.with_changes(body=self._rewrite(list(original_node.body), list(updated_node.body)))


class ChannelsLast(Patch):
    name = "channels_last"
    DESCRIPTION = ChannelsLastCodemod.DESCRIPTION
    numerics_by_design = True
    redraws_dropout = "spatial"
    redraw_words = "channels-last lays the activations out in another order, where the same draws fall on other elements"
    prior = {
        "cpu": Belief(Effect(-0.15, 0.25, 0.0, 0.05),
                      "PyTorch channels-last tutorial: oneDNN convolutions run NHWC without a reorder per layer"),
        "cuda": Belief(Effect(-0.2, 0.2, 0.0, 0.05),
                       "PyTorch channels-last tutorial and NVIDIA's deep learning performance guide: tensor-core "
                       "convolutions are NHWC; NCHW inputs are transposed around each kernel"),
    }
    needles = (".backward(",)
    requires = (("Conv2d", "conv2d"), (".parameters(",))
    absent = ("channels_last",)
    reach = "module"  # which names are models is read from the whole file
    codemod = ChannelsLastCodemod
