"""What an LLM diff must not do to a source file, judged on its syntax tree (libcst), not its text.

A file is read into *findings*: every node one of the rules below cares about, keyed by the rule,
the node's code with whitespace removed, and the control flow around it (the ``if``/``while``/
``for`` headers and the function it sits in). A diff is refused when the patched file's findings
differ from the original's:

- for the rules that guard what the job computes and reports (``loss``, ``probe``, ``step``), in
  either direction: such a line may move (re-indented, wrapped in a ``with``), never change,
  appear, disappear, or change the branch it runs in;
- for the rules that guard the measurement and the trial's isolation, when the patched file has
  one more than the original: code the user already had is theirs, code a patch adds is judged.

Names are resolved through the imports (``import infrarsi.probe as _p; _p._last = None`` is a
write to ``infrarsi.probe._last``), so renaming an import does not hide a use. No static rule
is complete (``getattr`` with a computed name, code built at run time): the trial's own checks
(the workspace compared with its snapshot after the run, the loss and step checks) stand behind
them, and docs/INTERFACES.md says which check covers what.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, QualifiedNameProvider

RULES = {
    "loss": "changes the loss computation",
    "probe": "changes the probe calls",
    "step": "changes when backward() or the optimizer step runs",
    "infrarsi": "reaches into InfraRSI's internals",
    "clock": "patches the clock",
    "monkeypatch": "writes to an imported module",
    "imports": "tampers with the import system",
    "dynamic": "loads or runs code dynamically",
    "process": "starts another process",
    "exit": "ends the process or hooks its exit",
    "outside": "reaches outside the workspace",
}
SYMMETRIC = frozenset({"loss", "probe", "step"})
"""Rules whose findings must match exactly; the others only must not grow."""

_LOSS_NAME = re.compile(r"loss", re.IGNORECASE)
_LOSS_FN = re.compile(r"cross_entropy|nll_loss|kl_div|_loss$|^loss$|Loss$")
_PROBE_CALLS = ("infrarsi.probe.step", "infrarsi.probe.phase", "infrarsi.probe.model")
_STEP_CALLEE = re.compile(r"optim|scaler|sched", re.IGNORECASE)
_CLOCK_MODULES = ("time", "datetime")
_INFRARSI = ("infrarsi", "_infrarsi_launcher", "sitecustomize", "usercustomize")
"""InfraRSI's package and what its launcher loads into the job before the job's own code."""
# Attribute writes into torch that only set configuration: a legitimate speed patch makes them.
_TORCH_SETTINGS = ("torch.backends.", "torch._dynamo.config.", "torch._inductor.config.", "torch._functorch.config.")
_IMPORT_SYSTEM = ("sys.modules", "sys.meta_path", "sys.path", "sys.path_hooks", "sys.path_importer_cache",
                  "sys.pycache_prefix", "sys.dont_write_bytecode", "sys.settrace", "sys.setprofile",
                  "sys.addaudithook", "builtins.__import__", "importlib.reload", "importlib.invalidate_caches")
_DYNAMIC = ("importlib", "builtins.exec", "builtins.eval", "builtins.compile", "runpy", "marshal", "ctypes",
            "zipimport", "imp", "pickle", "dill", "types.CodeType", "types.FunctionType", "types.ModuleType",
            "builtins.globals", "builtins.locals", "builtins.vars")
_PROCESS = ("subprocess", "pty", "multiprocessing", "concurrent.futures.ProcessPoolExecutor", "os.system",
            "os.popen", "os.fork", "os.forkpty", "os.kill", "os.killpg", "os.posix_spawn", "os.posix_spawnp",
            "os.exec", "os.spawn", "signal")
_EXIT = ("sys.exit", "os._exit", "os.abort", "builtins.exit", "builtins.quit", "atexit", "builtins.SystemExit",
         "builtins.KeyboardInterrupt")
_OUTSIDE = ("tempfile", "os.path.expanduser", "os.path.expandvars", "pathlib.Path.home", "os.chdir", "os.environ", "os.environb", "os.getenv", "os.putenv", "os.unsetenv",
            "os.symlink", "os.link", "shutil")
_STATE = re.compile(r"INFRARSI_|\.infrarsi", re.IGNORECASE)
"""InfraRSI's environment variables and state folder: where the probe file and the references live."""
_ABSOLUTE = re.compile(r"^(?:/[\w.~-]|~)|(?:^|/)\.\.(?:/|$)")


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    """A key of RULES."""
    code: str
    """The node's code as written (for the reason)."""
    key: str
    """The rule, the code without whitespace and the control flow around it."""


def _matches(qualified: str, prefixes: tuple[str, ...]) -> bool:
    return any(qualified == p or qualified.startswith(p + ".") or (p.endswith(("exec", "spawn")) and
                                                                    qualified.startswith(p)) for p in prefixes)


class _Reader(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self, module: cst.Module):
        self.module = module
        self.found: list[Finding] = []
        self.flow: list[str] = []
        self.loops: list[cst.CSTNode] = []

    # --- helpers ---------------------------------------------------------------------------

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node).strip()

    def add(self, rule: str, node: cst.CSTNode, *, flow: bool = False) -> None:
        code = self.code(node)
        where = "|".join(self.flow) if flow else ""
        self.found.append(Finding(rule, code, f"{rule}:{_squeeze(code)}@{where}"))

    def names(self, node: cst.CSTNode) -> set[str]:
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())
                if q.source.name in ("IMPORT", "BUILTIN")}

    def target_names(self, node: cst.BaseExpression) -> set[str]:
        """Qualified names of the outermost part of an attribute/subscript/call chain that has one."""
        while True:
            names = self.names(node)
            if names:
                return names
            if isinstance(node, (cst.Attribute, cst.Subscript)):
                node = node.value
            elif isinstance(node, cst.Call):
                node = node.func
            else:
                return set()

    def _leaf(self, node: cst.BaseExpression) -> str:
        while isinstance(node, (cst.Subscript, cst.Attribute)):
            if isinstance(node, cst.Attribute):
                return node.attr.value
            node = node.value
        return node.value if isinstance(node, cst.Name) else ""

    def _chain_names(self, node: cst.BaseExpression) -> list[str]:
        out = []
        while True:
            if isinstance(node, cst.Name):
                return out + [node.value]
            if isinstance(node, cst.Attribute):
                out.append(node.attr.value)
                node = node.value
            elif isinstance(node, (cst.Subscript, cst.Call)):
                node = node.value if isinstance(node, cst.Subscript) else node.func
            else:
                return out

    def targets_loss(self, target: cst.BaseExpression) -> bool:
        if isinstance(target, (cst.Tuple, cst.List)):
            return any(self.targets_loss(e.value) for e in target.elements)
        if isinstance(target, cst.StarredElement):
            return self.targets_loss(target.value)
        return any(_LOSS_NAME.search(n) for n in self._chain_names(target))

    def _write(self, target: cst.BaseExpression, stmt: cst.CSTNode) -> None:
        """A store into ``target``: module attributes, the import system, the clock."""
        if isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self._write(e.value, stmt)
            return
        if isinstance(target, cst.StarredElement):
            return self._write(target.value, stmt)
        if not isinstance(target, (cst.Attribute, cst.Subscript)):
            return
        for name in self.target_names(target):
            self._judge_write(name, stmt)

    def _judge_write(self, name: str, stmt: cst.CSTNode) -> None:
        if _matches(name, _CLOCK_MODULES):
            self.add("clock", stmt)
        elif _matches(name, _INFRARSI):
            self.add("infrarsi", stmt)
        elif _matches(name, _IMPORT_SYSTEM):
            self.add("imports", stmt)
        elif _matches(name, ("os.environ", "os.environb")):
            self.add("outside", stmt)
        elif not name.startswith(_TORCH_SETTINGS):
            self.add("monkeypatch", stmt)

    # --- control flow ------------------------------------------------------------------------

    def visit_If(self, node: cst.If) -> None:
        self.flow.append("if " + _squeeze(self.code(node.test)))

    def leave_If(self, node: cst.If) -> None:
        self.flow.pop()

    def visit_Else(self, node: cst.Else) -> None:
        self.flow.append("else")

    def leave_Else(self, node: cst.Else) -> None:
        self.flow.pop()

    def visit_While(self, node: cst.While) -> None:
        self.flow.append("while " + _squeeze(self.code(node.test)))
        self.loops.append(node)

    def leave_While(self, node: cst.While) -> None:
        self.flow.pop()
        self.loops.pop()

    def visit_For(self, node: cst.For) -> None:
        header = f"for {self.code(node.target)} in {self.code(node.iter)}"
        if self.targets_loss(node.target):
            self.found.append(Finding("loss", header, f"loss:{_squeeze(header)}@{'|'.join(self.flow)}"))
        self.flow.append(_squeeze(header))
        self.loops.append(node)

    def leave_For(self, node: cst.For) -> None:
        self.flow.pop()
        self.loops.pop()

    def visit_Try(self, node: cst.Try) -> None:
        self.flow.append("try")

    def leave_Try(self, node: cst.Try) -> None:
        self.flow.pop()

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self.flow.append("except")

    def leave_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self.flow.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.flow.append("def " + node.name.value)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.flow.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.flow.append("lambda")

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self.flow.pop()

    def _skip(self, node: cst.CSTNode) -> None:
        # A new way out of a loop that trains or reports skips part of the work.
        if self.loops and _trains(self.loops[-1]):
            self.add("step", node, flow=True)

    def visit_Continue(self, node: cst.Continue) -> None:
        self._skip(node)

    def visit_Break(self, node: cst.Break) -> None:
        self._skip(node)

    # --- statements --------------------------------------------------------------------------

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(self.targets_loss(t.target) for t in node.targets):
            self.add("loss", node, flow=True)
        for t in node.targets:
            self._write(t.target, node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self.targets_loss(node.target):
            self.add("loss", node, flow=True)
        self._write(node.target, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and self.targets_loss(node.target):
            self.add("loss", node, flow=True)
        self._write(node.target, node)

    def visit_Del(self, node: cst.Del) -> None:
        self._write(node.target, node)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        if self.targets_loss(node.target):
            self.add("loss", node, flow=True)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None and self.targets_loss(node.asname.name):
            self.add("loss", node, flow=True)

    def visit_Raise(self, node: cst.Raise) -> None:
        if node.exc is not None and self.target_names(node.exc) & {"builtins.SystemExit", "builtins.KeyboardInterrupt"}:
            self.add("exit", node)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._imported(self.code(alias.name), node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is None:  # relative: the repo's own modules
            return
        base = self.code(node.module)
        if isinstance(node.names, cst.ImportStar):
            return self._imported(base, node)
        for alias in node.names:
            self._imported(f"{base}.{self.code(alias.name)}", node)

    def _imported(self, name: str, node: cst.CSTNode) -> None:
        for rule, prefixes in (("infrarsi", _INFRARSI), ("dynamic", _DYNAMIC),
                               ("process", _PROCESS), ("exit", ("atexit",)), ("outside", ("tempfile", "shutil"))):
            if _matches(name, prefixes):
                self.add(rule, node)
                return

    # --- expressions -------------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        names = self.names(node.func)
        leaf = self._leaf(node.func)
        if names & set(_PROBE_CALLS):
            self.add("probe", node, flow=True)
        elif leaf == "backward" or names & {"torch.autograd.backward", "torch.autograd.grad"} or (
                leaf in ("step", "zero_grad") and any(_STEP_CALLEE.search(n) for n in self._chain_names(node.func)[1:])):
            self.add("step", node, flow=True)
        if _LOSS_FN.search(leaf) or (leaf.endswith("_") and not leaf.startswith("_")
                                     and any(_LOSS_NAME.search(n) for n in self._chain_names(node.func)[1:])):
            self.add("loss", node, flow=True)
        if names & {"builtins.setattr", "builtins.delattr"} and node.args:
            for name in self.target_names(node.args[0].value):
                self._judge_write(name, node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)

    def _reference(self, node: cst.BaseExpression) -> None:
        for name in self.names(node):
            if _matches(name, _INFRARSI) and name not in (*_PROBE_CALLS, "infrarsi.probe", "infrarsi"):
                self.add("infrarsi", node)
            elif _matches(name, _IMPORT_SYSTEM):
                self.add("imports", node)
            elif _matches(name, _DYNAMIC):
                self.add("dynamic", node)
            elif _matches(name, _PROCESS):
                self.add("process", node)
            elif _matches(name, _EXIT):
                self.add("exit", node)
            elif _matches(name, _OUTSIDE):
                self.add("outside", node)
            else:
                continue
            return  # the outermost name that matched says it; its parts need not say it again

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._literal(node, node.evaluated_value)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        first = node.parts[0] if node.parts else None
        if isinstance(first, cst.FormattedStringText):
            self._literal(node, first.value)

    def _literal(self, node: cst.CSTNode, value: str | bytes) -> None:
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        if _STATE.search(text):
            self.add("infrarsi", node)
        elif _ABSOLUTE.search(text):
            self.add("outside", node)


def _trains(loop: cst.CSTNode) -> bool:
    """Whether a loop's body calls backward(), an optimizer step or the probe."""

    class _Find(cst.CSTVisitor):
        hit = False

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            leaf = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
            if leaf in ("backward", "step"):
                self.hit = True

    finder = _Find()
    loop.body.visit(finder)
    return finder.hit


def findings(source: str) -> list[Finding]:
    """Every finding in ``source``; raises libcst's ParserSyntaxError when it does not parse."""
    wrapper = MetadataWrapper(cst.parse_module(source))
    reader = _Reader(wrapper.module)
    wrapper.visit(reader)
    return reader.found


def diff_problem(rel: str, before: str, after: str) -> str | None:
    """Why changing ``rel`` from ``before`` to ``after`` is refused (``contract: …``), or None."""
    try:
        old = findings(before)
        new = findings(after)
    except cst.ParserSyntaxError as err:
        return f"contract: {rel} cannot be read as Python, so the diff cannot be checked: {err.message}"
    old_keys, new_keys = Counter(f.key for f in old), Counter(f.key for f in new)
    for finding in new:
        if new_keys[finding.key] > old_keys[finding.key]:
            return f"contract: {RULES[finding.rule]} in {rel}: {_short(finding.code)!r}"
    for finding in old:
        if finding.rule in SYMMETRIC and new_keys[finding.key] < old_keys[finding.key]:
            return f"contract: {RULES[finding.rule]} in {rel}: {_short(finding.code)!r} is gone or moved"
    return None


def _squeeze(code: str) -> str:
    return re.sub(r"\s+", "", code)


def _short(code: str) -> str:
    line = " ".join(code.split())
    return line if len(line) <= 120 else line[:117] + "..."
