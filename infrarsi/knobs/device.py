"""A job whose default device this machine does not have: the baseline moved to what it has.

A device knob defaulting to ``cuda`` (``--device cuda``, ``device = 'cuda'``, a dataclass field) or
a CUDA switch defaulting to on (``--cuda``, ``use_gpu = True``) on a machine without CUDA gets an
override to ``cpu`` / off, with a note naming the knob and the machine. A script that needs CUDA
with no knob to say otherwise (an unconditional ``assert torch.cuda.is_available()`` or
``.cuda()`` call) cannot be moved: init stops with one line saying where.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeGuard

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from infrarsi.contract import Knob, KnobValue
from infrarsi.knobs.loop import is_main_guard
from infrarsi.knobs.source import DiscoveryError, dotted

_DEVICE_NAME = re.compile(r"(train_|compute_|torch_)?device(_type)?|accelerator")
_SWITCH_NAME = re.compile(r"(use_|enable_|with_)?(cuda|gpu)")


@dataclass(slots=True)
class DeviceFit:
    overrides: dict[str, KnobValue] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _wants_cuda(knob: Knob) -> KnobValue | None:
    """The value that runs ``knob``'s job without CUDA, when its default needs CUDA."""
    name = knob.name.lower().replace("-", "_")
    if knob.type == "str" and _DEVICE_NAME.fullmatch(name) and str(knob.default).lower().startswith(("cuda", "gpu")):
        return "cpu"
    if knob.type == "bool" and _SWITCH_NAME.fullmatch(name) and knob.default is True:
        return False
    return None


def fit_device(knobs: list[Knob], set_by: dict[str, str], has_cuda: bool, machine: str) -> DeviceFit:
    """Overrides for knobs whose default needs a CUDA device this machine lacks."""
    fit = DeviceFit()
    if has_cuda:
        return fit
    for knob in knobs:
        value = _wants_cuda(knob)
        if value is None:
            continue
        origin = set_by.get(knob.name)
        if origin == "the command":
            said = f"the command sets knob {knob.name} to {knob.default!r}"
        elif origin:
            said = f"knob {knob.name} is {knob.default!r} in {origin}"
        else:
            said = f"knob {knob.name} defaults to {knob.default!r}" + (f" ({knob.source})" if knob.source else "")
        how = "on the command line" if knob.flag else f"written into {knob.source_path}"
        fit.overrides[knob.name] = value
        fit.notes.append(f"{said} but this machine ({machine}) has no CUDA device: "
                         f"the baseline runs with {knob.name}={value} ({how})")
    return fit


def module_device_knob(rel: str, wrapper: MetadataWrapper) -> Knob | None:
    """A module-level ``device = "cuda"`` no parser exposes: a knob written into source."""
    positions = wrapper.resolve(PositionProvider)
    for stmt in wrapper.module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign):
            assign = stmt.body[0]
            if len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
                name = assign.targets[0].target.value
                value = assign.value
                if _DEVICE_NAME.fullmatch(name.lower()) and isinstance(value, cst.SimpleString):
                    text = value.evaluated_value
                    if isinstance(text, str):
                        return Knob(name=name, role="workload", type="str", default=text, flag="",
                                    source=f"{rel}:{positions[stmt].start.line}",
                                    help="module-level device, not exposed on the command line")
    return None


# ---------------------------------------------------------------- CUDA required with no knob


def _unconditional(body: Sequence[cst.CSTNode]) -> list[cst.BaseSmallStatement]:
    """Small statements that run whenever ``body`` runs: under no if or try."""
    out: list[cst.BaseSmallStatement] = []
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            out.extend(stmt.body)
        elif isinstance(stmt, (cst.For, cst.With)) and isinstance(stmt.body, cst.IndentedBlock):
            out.extend(_unconditional(stmt.body.body))
    return out


def _plain_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and its children, not descending into conditional expressions or lambdas."""
    yield node
    for child in node.children:
        if isinstance(child, (cst.IfExp, cst.BooleanOperation, cst.Lambda)):
            continue
        yield from _plain_nodes(child)


def _cuda_literal(node: cst.BaseExpression) -> TypeGuard[cst.SimpleString]:
    return isinstance(node, cst.SimpleString) and str(node.evaluated_value).startswith("cuda")


def _needs_cuda(small: cst.BaseSmallStatement) -> tuple[cst.CSTNode, str] | None:
    if isinstance(small, cst.Assert):
        code = cst.Module(body=[]).code_for_node(small.test)
        if "cuda.is_available" in code or "cuda.device_count" in code:
            return small, f"assert {code}"
    for node in _plain_nodes(small):
        if not isinstance(node, cst.Call):
            continue
        name = dotted(node.func)
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "cuda" and not node.args:
            return node, f"{name or '….cuda'}()"
        if name in ("torch.device", "device") and node.args and _cuda_literal(node.args[0].value):
            return node, f"{name}({node.args[0].value.value})"
        if name.endswith((".to", ".set_device")) and node.args and _cuda_literal(node.args[0].value):
            return node, f"{name}({node.args[0].value.value})"
    return None


def require_no_cuda(rel: str, wrapper: MetadataWrapper, machine: str) -> None:
    """Raise DiscoveryError when ``rel`` needs CUDA unconditionally (module level, the __main__
    block, and the script's functions those call)."""
    module = wrapper.module
    positions = wrapper.resolve(PositionProvider)
    functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    pending = [s for s in module.body if not isinstance(s, (cst.FunctionDef, cst.ClassDef)) and not is_main_guard(s)]
    bodies: list[Sequence[cst.CSTNode]] = [pending] + [list(s.body.body) for s in module.body if is_main_guard(s)]
    seen: set[str] = set()
    while bodies:
        body = bodies.pop(0)
        for small in _unconditional(body):
            hit = _needs_cuda(small)
            if hit is not None:
                node, text = hit
                raise DiscoveryError(
                    f"{rel}:{positions[node].start.line} needs CUDA ({text}) and no knob chooses the device; "
                    f"this machine ({machine}) has no CUDA device"
                )
            for node in _plain_nodes(small):
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
                    fn = functions.get(node.func.value)
                    if fn is not None and fn.name.value not in seen and isinstance(fn.body, cst.IndentedBlock):
                        seen.add(fn.name.value)
                        bodies.append(list(fn.body.body))


def is_device_knob(knob: Knob) -> bool:
    """Whether ``knob`` chooses the device (a device name or a CUDA switch), whatever its default."""
    name = knob.name.lower().replace("-", "_")
    return bool(_DEVICE_NAME.fullmatch(name) or _SWITCH_NAME.fullmatch(name))
