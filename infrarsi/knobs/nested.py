"""Nested configs overridden from the command line, by path.

- Config nodes built in code: ``C = ConfigNode()``, ``C.trainer = Trainer.get_default_config()``,
  ``C.trainer.num_workers = 4`` (or ``ConfigDict({"num_workers": 4})``, ``CN(dict(num_workers=4))``),
  returned by a function whose result the script merges with ``--trainer.num_workers=2``
  (``merge_from_args``, the yacs/minGPT style).
- Hydra: the YAML file ``@hydra.main(config_path=..., config_name=...)`` names, composed with the
  config group files its ``defaults`` list selects (``- optimizer: adam`` reads
  ``<config_path>/optimizer/adam.yaml`` under ``optimizer.``; ``group@pkg`` and a ``# @package``
  header move it, the command's ``optimizer=sgd`` chooses another file), merged in the list's order
  with ``_self_`` (last when the list omits it, as Hydra >= 1.1 does) placing the primary file's own
  keys, and overridden with ``trainer.num_workers=2`` (no dashes). A group file's own ``defaults``
  list is not read.
- ml_collections: the ``ConfigDict`` an absl ``config_flags.DEFINE_config_file("config", default)``
  loads (``get_config()`` of the file the command's ``--config=`` names, else the default) or
  ``DEFINE_config_dict("config", get_config())`` holds, overridden with ``--config.batch_size=32``:
  its leaves are named under the flag's name (``config.batch_size``).

Each literal leaf becomes a knob (``knobs/discover.py``, style ``nested``) named by its path
(``trainer.num_workers``) with the flag ``--trainer.num_workers``; its role comes from its last
part (knobs/catalog.py). A sub-node built
by another function (``Trainer.get_default_config``, found in any of the job's files) is read under
the path it is attached at; a later assignment overrides an earlier one, as at run time. Nothing is
read where the script merges no command-line overrides: the flags would reach nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import cast

import libcst as cst

from infrarsi.commandline import script_settings
from infrarsi.contract import KnobValue
from infrarsi.knobs.config_files import nested_leaves, read_table
from infrarsi.knobs.source import (
    DiscoveryError,
    ParsedFile,
    dotted,
    is_knob_value,
    parse,
    string_literal,
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
class NestedConfig:
    """What init reads of a job's nested config."""

    settings: list[NestedSetting] = field(default_factory=list)
    choosers: dict[str, str] = field(default_factory=dict)
    """The command's flags that choose a config file (``--config``, Hydra's ``model``) -> what they
    choose: part of the job, not knobs."""
    warnings: list[str] = field(default_factory=list)


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


def _dict_leaves(f: ParsedFile, node: cst.BaseExpression, prefix: str) -> list[tuple[str, KnobValue, str]] | None:
    """The leaves of a dict literal or a node class called with one (``ConfigDict({"lr": 0.1})``,
    ``CN(dict(lr=0.1))``, ``SimpleNamespace(lr=0.1)``), nested ones by path; None for anything else."""
    out: list[tuple[str, KnobValue, str]] = []
    if isinstance(node, cst.Dict):
        items = [(string_literal(e.key), e.value) for e in node.elements if isinstance(e, cst.DictElement)]
    elif isinstance(node, cst.Call) and NODE_CLASS.fullmatch(dotted(node.func).rsplit(".", 1)[-1]):
        positional = [a.value for a in node.args if a.keyword is None]
        given = _dict_leaves(f, positional[0], prefix) if len(positional) == 1 else [] if not positional else None
        if given is None:
            return None  # built from something else than a dict: its leaves are not known
        out += given
        items = [(a.keyword.value, a.value) for a in node.args if a.keyword is not None]
    else:
        return None
    for key, value in items:
        if key is None:
            continue
        sub = _dict_leaves(f, value, f"{prefix}{key}.")
        if sub is not None:
            out += sub
            continue
        ok, literal = f.literal(value)
        if ok and is_knob_value(literal):
            out.append((f"{prefix}{key}", cast(KnobValue, literal), f.where(value)))
    return out


def _builder(f: ParsedFile, fn: cst.FunctionDef) -> _Builder | None:
    """The node ``fn`` builds: what its constructor is given and assignments to attribute paths of
    the name it returns."""
    node_name = _returned(fn.body)
    if node_name is None:
        return None
    out = _Builder()
    for stmt in walk(fn.body):
        if not (isinstance(stmt, cst.Assign) and len(stmt.targets) == 1):
            continue
        target = dotted(stmt.targets[0].target)
        if target != node_name and not target.startswith(node_name + "."):
            continue
        path = target[len(node_name) + 1:]
        ok, value = f.literal(stmt.value)
        if path and ok and is_knob_value(value):
            out.leaves.append((path, value, f.where(stmt)))
        elif path and isinstance(stmt.value, cst.Call) and not stmt.value.args and dotted(stmt.value.func):
            out.leaves.append((path, _Sub(dotted(stmt.value.func)), f.where(stmt)))
        else:
            out.leaves += _dict_leaves(f, stmt.value, f"{path}." if path else "") or []
    return out if out.leaves else None


def _builders(readers: list[ParsedFile]) -> dict[str, _Builder]:
    """Builders by ``Class.method`` and by bare function name."""
    out: dict[str, _Builder] = {}
    for f in readers:
        methods: set[int] = set()
        for node in walk(f.module):
            if isinstance(node, cst.ClassDef):
                for stmt in node.body.body:
                    if isinstance(stmt, cst.FunctionDef):
                        methods.add(id(stmt))  # keyed by its class only: a root of its own it is not
                        if b := _builder(f, stmt):
                            out[f"{node.name.value}.{stmt.name.value}"] = b
            elif isinstance(node, cst.FunctionDef) and id(node) not in methods and (b := _builder(f, node)):
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


def nested_config(repo: Path, readers: list[ParsedFile], args: Sequence[str] = (), cwd: str = ".") -> NestedConfig:
    """The first nested config the job reads (a node merged with overrides, Hydra's, ml_collections'):
    ``readers`` the entry point first, ``args`` the script's arguments on the owner's command, which
    runs in ``cwd`` (repo-relative)."""
    settings = nested_settings(readers)
    if settings:
        return NestedConfig(settings)
    return hydra_config(repo, readers[0], args) or config_flags_config(repo, readers, args, cwd) or NestedConfig()


def _argument(call: cst.Call, index: int, keyword: str) -> cst.BaseExpression | None:
    """The call's argument by keyword, else by position."""
    by_keyword = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
    positional = [a.value for a in call.args if a.keyword is None]
    return by_keyword if by_keyword is not None else positional[index] if index < len(positional) else None


# ---------------------------------------------------------------- Hydra


@dataclass(frozen=True, slots=True)
class _Default:
    """One entry of a Hydra defaults list: a group file, or the primary file's own keys (``_self_``)."""

    group: str
    """``optimizer``, ``server/db``; empty for ``_self_`` and for a config at the config path's root."""
    option: object
    """The file's name in its group (a string; ``None``, ``???`` or a list are not read)."""
    package: str = ""
    """``@pkg`` as the entry writes it (empty: the file's header, else the group)."""
    optional: bool = False

    @property
    def is_self(self) -> bool:
        return self.option == "_self_" and not self.group


def _defaults(listed: object, shown: str, warnings: list[str]) -> list[_Default]:
    """The primary file's defaults list, ``override`` entries replacing the choice they name."""
    out: list[_Default] = []
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, str):
            group, _, option = item.lstrip("/").rpartition("/")  # a config by name: ``base``, ``db/mysql``
            entry = _Default(group, option)
        elif isinstance(item, dict) and len(item) == 1 and isinstance(key := next(iter(item)), str):
            *keywords, target = key.split()
            group, _, package = target.lstrip("/").partition("@")
            entry = _Default(group, item[key], package, "optional" in keywords)
            at = next((i for i, d in enumerate(out) if d.group == group and d.package == package), None)
            if "override" in keywords and at is not None:
                out[at] = entry  # Hydra keeps an overridden choice where the group was listed
                continue
        else:
            warnings.append(f"{shown}: defaults entry {item!r} is not read (not a config name or `group: option`)")
            continue
        out.append(entry)
    if not any(d.is_self for d in out):
        out.append(_Default("", "_self_"))  # Hydra >= 1.1 merges the primary file's keys last
    return out


_HEADER = re.compile(r"#\s*@package\s+(\S+)")


def _package(spec: str, group: str) -> str:
    """The dotted path a group file's keys go under: Hydra's package spec from the root (the primary
    config's package), ``_global_`` the root itself and ``_group_`` the group's path."""
    parts = [group.replace("/", ".") if p == "_group_" else p for p in spec.split(".") if p not in ("_global_", "_here_")]
    return ".".join(p for p in parts if p)


def _header(path: Path) -> str:
    """The ``# @package`` header in the comments that open a YAML file, else empty."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            break
        if match := _HEADER.match(line.strip()):
            return match[1]
    return ""


_CHOICE = re.compile(r"\+?(?P<group>[A-Za-z_][\w/]*)(@(?P<package>[\w.]+))?=(?P<option>.+)")
"""A group choice on the command: ``model=large``, ``model@net=large``, ``+extra=on`` (adds a group)."""


def _choices(args: Sequence[str], config_dir: Path) -> list[tuple[str, _Default]]:
    """The command's group choices, each with its setting as written up to ``=``."""
    out = []
    for arg in args:
        match = _CHOICE.fullmatch(arg)
        if match and (config_dir / match["group"]).is_dir():
            out.append((arg.partition("=")[0], _Default(match["group"], match["option"], match["package"] or "")))
    return out


def hydra_config(repo: Path, entry: ParsedFile, args: Sequence[str] = ()) -> NestedConfig | None:
    """The config the entry point's ``@hydra.main`` composes (None without one, or when its path or
    name is not a literal); ``args``: the script's arguments, whose group choices select files."""
    for node in walk(entry.module):
        if not isinstance(node, cst.FunctionDef):
            continue
        for decorator in node.decorators:
            call = decorator.decorator
            if not (isinstance(call, cst.Call) and dotted(call.func) in ("hydra.main", "main")):
                continue
            name = string_literal(_argument(call, 1, "config_name"))
            if name is None:
                continue
            config_dir = PurePosixPath(entry.rel).parent / (string_literal(_argument(call, 0, "config_path")) or ".")
            rel = config_dir / f"{name}.yaml"
            if not (repo / rel).is_file():
                raise DiscoveryError(f"{entry.where(decorator)}: @hydra.main names {rel}, which is not in the repository")
            return _compose(repo, config_dir, rel, args)
    return None


def _compose(repo: Path, config_dir: PurePosixPath, primary: PurePosixPath, args: Sequence[str]) -> NestedConfig:
    """The primary file merged with the group files its defaults list and the command choose."""
    out = NestedConfig()
    doc = read_table(repo / primary, primary.as_posix())
    entries = _defaults(doc.get("defaults", []), primary.as_posix(), out.warnings)
    for setting, choice in _choices(args, repo / config_dir):
        at = next((i for i, d in enumerate(entries) if (d.group, d.package) == (choice.group, choice.package)), None)
        if at is None:
            entries.append(choice)  # ``+group=option`` appends to the list
        else:
            entries[at] = replace(choice, optional=entries[at].optional)
        out.choosers[setting] = f"chooses config group {choice.group}'s file {config_dir / choice.group}/{choice.option}.yaml"
    merged: dict[str, NestedSetting] = {}
    for entry in entries:
        if entry.is_self:
            leaves, rel = nested_leaves(doc), primary
        elif isinstance(entry.option, str) and entry.option != "???":
            rel = config_dir / entry.group / f"{entry.option}.yaml"
            if not (repo / rel).is_file():
                if not entry.optional:
                    out.warnings.append(f"{rel}, which {primary}'s defaults list or the command chooses for config "
                                        f"group {entry.group or '(root)'}, is not in the repository: nothing read from it")
                continue
            spec = entry.package or _header(repo / rel) or "_group_"
            leaves = nested_leaves(read_table(repo / rel, rel.as_posix()), _package(spec, entry.group))
        else:
            if entry.option == "???":
                out.warnings.append(f"{primary}: config group {entry.group} is mandatory (???) and the command "
                                    "chooses no file for it: nothing read for it")
            elif entry.option is not None:  # null: the group has no file on purpose
                out.warnings.append(f"{primary}: config group {entry.group}'s choice {entry.option!r} is not one file "
                                    "name: nothing read for it")
            continue
        for key, value in leaves.items():
            merged[key] = NestedSetting(key, value, rel.as_posix(), f"hydra config {rel.as_posix()}", key)
    out.settings = list(merged.values())
    return out


# ---------------------------------------------------------------- ml_collections


CONFIG_FLAGS = ("DEFINE_config_file", "DEFINE_config_dict")
"""absl ``config_flags`` definitions of a ConfigDict flag, overridden with ``--<name>.path=value``."""


def config_flags_config(repo: Path, readers: list[ParsedFile], args: Sequence[str] = (),
                        cwd: str = ".") -> NestedConfig | None:
    """The ConfigDict an absl ``config_flags`` flag of the job holds (None without one)."""
    for f in readers:
        for node in walk(f.module):
            if isinstance(node, cst.Call) and (kind := dotted(node.func).rsplit(".", 1)[-1]) in CONFIG_FLAGS:
                name = string_literal(_argument(node, 0, "name"))
                if name is None:
                    return NestedConfig(warnings=[f"{f.where(node)}: {kind}'s flag name is not a literal: its "
                                                  "config is not read"])
                if kind == "DEFINE_config_file":
                    out = _config_file(repo, f.where(node), name, _argument(node, 1, "default"), args, cwd)
                else:
                    out = _config_dict(f, name, _argument(node, 1, "config"), readers)
                if not out.settings and not out.warnings:
                    out.warnings.append(f"{f.where(node)}: no setting of --{name}'s ConfigDict is read (init reads a "
                                        "get_config() that fills one, and dict literals): none is a knob")
                return out
    return None


def _config_file(repo: Path, where: str, name: str, default: cst.BaseExpression | None, args: Sequence[str],
                 cwd: str) -> NestedConfig:
    """``get_config()`` of the file the command's ``--name=`` gives, else the definition's default."""
    out = NestedConfig()
    flag = f"--{name}"
    given = next((a.value for a in script_settings(list(args)) if a.flag == flag and a.value), None)
    text = given or string_literal(default)
    if text is None:
        out.warnings.append(f"{where}: the config file of {flag} is neither on the command nor a literal default: "
                            "its settings are not read")
        return out
    text = text.partition(":")[0]  # ``file.py:arg`` hands ``arg`` to get_config
    path = (repo / cwd / text).resolve()
    if not path.is_file() or not path.is_relative_to(repo.resolve()):
        raise DiscoveryError(f"{where}: {flag} loads {text} (from {'the command' if given else 'its default'}), "
                             f"which is not a file of the repository")
    rel = path.relative_to(repo.resolve()).as_posix()
    if given:
        out.choosers[flag] = f"names the config file {rel}"
    config = ParsedFile(rel, parse(repo, rel))
    out.settings = _config_leaves(name, "get_config", _builders([config]), rel)
    return out


def _config_dict(f: ParsedFile, name: str, value: cst.BaseExpression | None, readers: list[ParsedFile]) -> NestedConfig:
    """The ConfigDict the script defines the flag with: a builder's result, or a literal."""
    if isinstance(value, cst.Name):  # a module-level name bound to the config
        value = next((s.value for n in f.module.body if isinstance(n, cst.SimpleStatementLine)
                      for s in n.body if isinstance(s, cst.Assign) and dotted(s.targets[0].target) == value.value),
                     None)
    builders = _builders(readers)
    if isinstance(value, cst.Call) and not value.args:
        callee = next((c for c in _Sub(dotted(value.func)).names() if c in builders), None)
        if callee is not None:
            return NestedConfig(_config_leaves(name, callee, builders, f"built by {callee}"))
    leaves = _dict_leaves(f, value, f"{name}.") if value is not None else None
    return NestedConfig([NestedSetting(path, v, where, f"ml_collections config of --{name}", f"--{path}")
                         for path, v, where in leaves or []])


def _config_leaves(name: str, root: str, builders: dict[str, _Builder], shown: str) -> list[NestedSetting]:
    if root not in builders:
        return []
    return [NestedSetting(path, value, where, f"ml_collections config of --{name} ({shown})", f"--{path}")
            for path, (value, where) in _leaves(root, builders, f"{name}.", frozenset({root})).items()]
