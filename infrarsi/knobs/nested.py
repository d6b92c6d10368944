"""Nested configs overridden from the command line, by path.

- Config nodes built in code: ``C = ConfigNode()``, ``C.trainer = Trainer.get_default_config()``,
  ``C.trainer.num_workers = 4``, returned by a function whose result the script merges with
  ``--trainer.num_workers=2`` (``merge_from_args``, the yacs/minGPT style).
- Hydra: the YAML file ``@hydra.main(config_path=..., config_name=...)`` names, overridden with
  ``trainer.num_workers=2`` (no dashes); its ``defaults`` list (config groups) is not read.

Each literal leaf becomes a knob (``knobs/discover.py``, style ``nested``) named by its path
(``trainer.num_workers``) with the flag ``--trainer.num_workers``; its role comes from its last
part (knobs/catalog.py). A sub-node built
by another function (``Trainer.get_default_config``, found in any of the job's files) is read under
the path it is attached at; a later assignment overrides an earlier one, as at run time. Nothing is
read where the script merges no command-line overrides: the flags would reach nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import libcst as cst

from infrarsi.contract import KnobValue
from infrarsi.knobs.config_files import read_nested_data_config
from infrarsi.knobs.source import (
    DiscoveryError,
    ParsedFile,
    dotted,
    is_knob_value,
    walk,
)

MERGERS = ("merge_from_args",)
"""Methods that apply ``--path=value`` overrides to a config node."""
NODE_CLASS = re.compile(r"(?i).*(cfg|conf|config|node|namespace|dict)|CN")
"""Classes a config node is made of (``CfgNode``, ``ConfigDict``, ``SimpleNamespace``, ``CN``): a
function that fills any other object (a model) builds no config."""


@dataclass(frozen=True, slots=True)
class NestedSetting:
    """One leaf of a config node: its path, value, where it is written and which function builds it."""

    path: str
    value: KnobValue
    source: str
    builder: str
    flag: str
    """``--trainer.max_iters`` for a node built in code, ``trainer.max_iters`` for Hydra."""


@dataclass(slots=True)
class _Builder:
    """A function that builds a node: its leaves and the sub-nodes other functions build."""

    leaves: list[tuple[str, object, str]] = field(default_factory=list)
    """(path, value, file:line) in source order; a sub-node entry has value ``_Sub``."""


@dataclass(frozen=True, slots=True)
class _Sub:
    callee: str

    def names(self) -> tuple[str, ...]:
        """How a builder may be keyed: as called, and as ``Class.method`` from a longer path."""
        return self.callee, ".".join(self.callee.split(".")[-2:])


def _returned(body: cst.BaseSuite) -> str | None:
    """The name the function returns, where it is made by a config node class."""
    returned = next((n.value.value for n in walk(body) if isinstance(n, cst.Return) and isinstance(n.value, cst.Name)),
                    None)
    for node in walk(body):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and dotted(node.targets[0].target) == returned \
                and isinstance(node.value, cst.Call) and NODE_CLASS.fullmatch(dotted(node.value.func).rsplit(".", 1)[-1]):
            return returned
    return None


def _builder(f: ParsedFile, fn: cst.FunctionDef) -> _Builder | None:
    """The node ``fn`` builds: assignments to attribute paths of the name it returns."""
    node_name = _returned(fn.body)
    if node_name is None:
        return None
    out = _Builder()
    for stmt in walk(fn.body):
        if not (isinstance(stmt, cst.Assign) and len(stmt.targets) == 1):
            continue
        path = dotted(stmt.targets[0].target)
        if not path.startswith(node_name + "."):
            continue
        path = path.removeprefix(node_name + ".")
        ok, value = f.literal(stmt.value)
        if ok and is_knob_value(value):
            out.leaves.append((path, value, f.where(stmt)))
        elif isinstance(stmt.value, cst.Call) and not stmt.value.args and dotted(stmt.value.func):
            out.leaves.append((path, _Sub(dotted(stmt.value.func)), f.where(stmt)))
    return out if out.leaves else None


def _builders(readers: list[ParsedFile]) -> dict[str, _Builder]:
    """Builders by ``Class.method`` and by bare function name."""
    out: dict[str, _Builder] = {}
    for f in readers:
        for node in walk(f.module):
            if isinstance(node, cst.ClassDef):
                for stmt in node.body.body:
                    if isinstance(stmt, cst.FunctionDef) and (b := _builder(f, stmt)):
                        out[f"{node.name.value}.{stmt.name.value}"] = b
            elif isinstance(node, cst.FunctionDef) and (b := _builder(f, node)):
                out.setdefault(node.name.value, b)
    return out


def _leaves(name: str, builders: dict[str, _Builder], prefix: str, seen: frozenset[str]) -> dict[str, tuple]:
    """path -> (value, file:line) of the node ``name`` builds, sub-nodes expanded, later wins."""
    out: dict[str, tuple] = {}
    for path, value, where in builders[name].leaves:
        full = f"{prefix}{path}"
        if isinstance(value, _Sub):
            callee = next((c for c in value.names() if c in builders), None)
            if callee is not None and callee not in seen:
                out = {k: v for k, v in out.items() if not k.startswith(full + ".")}
                out.update(_leaves(callee, builders, full + ".", seen | {callee}))
        else:
            out[full] = (value, where)
    return out


def nested_settings(readers: list[ParsedFile]) -> list[NestedSetting]:
    """The leaves of each config node the job builds and merges command-line overrides into."""
    merged = any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in MERGERS
                 for f in readers for n in walk(f.module))
    if not merged:
        return []
    builders = _builders(readers)
    attached = {c for b in builders.values() for _, v, _ in b.leaves if isinstance(v, _Sub) for c in v.names()}
    out: dict[str, NestedSetting] = {}
    for name in builders:
        if name in attached:
            continue  # a sub-node: read under the path its parent attaches it at
        for path, (value, where) in _leaves(name, builders, "", frozenset({name})).items():
            out.setdefault(path, NestedSetting(path, value, where, f"config node built by {name}", f"--{path}"))
    return list(out.values())


def _keyword(call: cst.Call, name: str) -> str | None:
    arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)
    if arg is not None and isinstance(arg.value, cst.SimpleString):
        value = arg.value.evaluated_value
        return value if isinstance(value, str) else None
    return None


def hydra_settings(repo: Path, entry: ParsedFile) -> list[NestedSetting]:
    """The leaves of the YAML config the entry point's ``@hydra.main`` names (none without one, or
    when its path or name is not a literal)."""
    for node in walk(entry.module):
        if not isinstance(node, cst.FunctionDef):
            continue
        for decorator in node.decorators:
            call = decorator.decorator
            if not (isinstance(call, cst.Call) and dotted(call.func) in ("hydra.main", "main")):
                continue
            name = _keyword(call, "config_name")
            if name is None:
                continue
            rel = PurePosixPath(entry.rel).parent / (_keyword(call, "config_path") or ".") / f"{name}.yaml"
            path = repo / rel
            if not path.is_file():
                raise DiscoveryError(f"{entry.where(decorator)}: @hydra.main names {rel}, which is not in the repository")
            return [NestedSetting(key, value, rel.as_posix(), f"hydra config {rel.as_posix()}", key)
                    for key, value in read_nested_data_config(path, rel.as_posix()).items()]
    return []
