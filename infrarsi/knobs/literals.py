"""Settings a script writes in its code rather than taking from its command: knobs whose value a
trial writes into the source (``Knob.flag`` empty, ``knobs/rewrite.py``), so the search can move
them and ``apply`` commits the winner where the owner wrote it.

Three kinds, each with the role its place in the code gives it (not its name):

- ``DataLoader(...)`` keywords: ``num_workers`` always (absent means torch's default, 0: a
  loader the script builds without workers can get some), ``pin_memory`` where the machine has a
  CUDA device (it only speeds host-to-device copies), ``persistent_workers`` and
  ``prefetch_factor`` where the script writes them. One knob per keyword and file
  (``DataLoader.num_workers``) sets every loader of that file; a loader that passes the keyword
  as an expression keeps it (its value is the script's, and the knob that feeds it is the search's).
- ``torch.set_num_threads(<int>)``: the thread count the script fixes.
- ``torch.backends.cudnn.benchmark = <bool>``: where the machine has a CUDA device.

A setting the files give two different literals (one loader with 4 workers, another with 2) is
left as written: one knob cannot hold both.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from infrarsi.knobs.catalog import Rule
from infrarsi.knobs.dataflow import LOADER_KEYWORDS
from infrarsi.knobs.raw import RawKnob
from infrarsi.knobs.source import ParsedFile, dotted, walk

LOADER = "DataLoader"
ABSENT = {"num_workers": 0}
"""Keywords a knob is made for even where a loader leaves them out: torch's default stands in."""
CUDA_ONLY = {"pin_memory", "cudnn.benchmark"}
THREADS_CALL = "set_num_threads"
CUDNN_BENCHMARK = "cudnn.benchmark"


@dataclass(frozen=True, slots=True)
class Literal:
    """One setting written in code, as a knob with its role."""

    knob: RawKnob
    rule: Rule


def knob_name(call_or_target: str, keyword: str | None = None) -> str:
    """The knob's name: ``DataLoader.num_workers``, ``torch.set_num_threads``, ``torch.backends.cudnn.benchmark``."""
    if keyword is not None:
        return f"{call_or_target}.{keyword}"
    return {THREADS_CALL: f"torch.{THREADS_CALL}", CUDNN_BENCHMARK: f"torch.backends.{CUDNN_BENCHMARK}"}[call_or_target]


def written_in_code(name: str) -> bool:
    """Whether a knob of this name is a setting written in code (one of ``knob_name``'s)."""
    loader, _, keyword = name.partition(".")
    return (loader == LOADER and keyword in LOADER_KEYWORDS) or name in (knob_name(THREADS_CALL),
                                                                          knob_name(CUDNN_BENCHMARK))


def _type(value: object) -> str | None:
    return {bool: "bool", int: "int"}.get(type(value))


def _loader_values(f: ParsedFile, call: cst.Call) -> Iterator[tuple[str, bool | int, cst.CSTNode]]:
    """(keyword, value, node) for each speed keyword this loader writes as a literal or leaves out."""
    given = {a.keyword.value: a for a in call.args if a.keyword is not None}
    for keyword in LOADER_KEYWORDS:
        arg = given.get(keyword)
        if arg is None:
            if keyword in ABSENT:
                yield keyword, ABSENT[keyword], call
            continue
        ok, value = f.literal(arg.value)
        if ok and isinstance(value, (bool, int)):  # a literal is of the builtin type itself, never a subclass
            yield keyword, value, arg


def _found(f: ParsedFile) -> Iterator[tuple[str, str, bool | int, cst.CSTNode]]:
    """(setting, knob name, value, node) for every setting written in this file."""
    for node in walk(f.module):
        if isinstance(node, cst.Call):
            callee = dotted(node.func).rsplit(".", 1)[-1]
            if callee == LOADER:
                for keyword, written, where in _loader_values(f, node):
                    yield keyword, knob_name(LOADER, keyword), written, where
            elif callee == THREADS_CALL and len(node.args) == 1 and node.args[0].keyword is None:
                ok, value = f.literal(node.args[0].value)
                if ok and isinstance(value, int) and not isinstance(value, bool):
                    yield THREADS_CALL, knob_name(THREADS_CALL), value, node
        elif isinstance(node, cst.Assign) and len(node.targets) == 1 \
                and dotted(node.targets[0].target).endswith(CUDNN_BENCHMARK):
            ok, value = f.literal(node.value)
            if ok and isinstance(value, bool):
                yield CUDNN_BENCHMARK, knob_name(CUDNN_BENCHMARK), value, node


def _role(setting: str) -> str:
    if setting == THREADS_CALL:
        return "threads"
    if setting == CUDNN_BENCHMARK:
        return "cudnn_benchmark"
    return LOADER_KEYWORDS[setting]


def literal_settings(readers: list[ParsedFile], *, has_cuda: bool) -> list[Literal]:
    """The settings the job's files write in code, one knob each (the first file that writes one
    holds it; a file that writes it twice with different values gives none)."""
    out: dict[str, Literal] = {}
    for f in readers:
        here: dict[str, tuple[str, set[bool | int], cst.CSTNode]] = {}
        for setting, name, value, node in _found(f):
            if setting in CUDA_ONLY and not has_cuda:
                continue
            here.setdefault(name, (setting, set(), node))[1].add(value)
        for name, (setting, values, node) in here.items():
            if name in out or len(values) != 1:
                continue
            value = next(iter(values))
            knob = RawKnob(name, _type(value) or "int", value, help=f"written in code at {f.where(node)}",
                           source=f.where(node))
            out[name] = Literal(knob, Rule(_role(setting), ""))
    return list(out.values())
