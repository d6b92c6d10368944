"""Where each knob's value goes: a static taint analysis of the job's own modules with libcst.

A knob's value starts at ``<anything>.<name>`` (argparse namespaces, dataclass configs), for
configurator globals at the module name itself, and for click, typer and fire at the parameter of
the command function. It flows through assignments (tuple unpacking
element by element), dict literals and ``d.update``/``d[k] = v`` (so ``DataLoader(**kwargs)`` sees
its keys), attribute stores (``self.B = B``: later ``.B`` loads carry it), calls of the job's own
functions and classes (argument to parameter, ``return`` to the call) and arithmetic. Division
is tracked: a value in a denominator is *inverted* (``gbs // mbs`` grows as ``mbs`` shrinks), one
in a numerator is *scaled*. Tensor sizes (``.size()``, ``.shape``, ``len``) end a flow: a batch
that reaches the model's input must not taint every shape inside the model. So do the sizes a
tensor or a loader is built with (``torch.randint(n, (B,))``, ``x.view(B, T)``,
``DataLoader(batch_size=B)``): the batch acts there, and the data's values, the loss computed from
them and a checkpoint saved under the best validation loss do not carry it on.

Each place a value acts is a :class:`Sink`; ``infrarsi.knobs.roles`` turns a knob's sinks into
its role. Nothing is imported or run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from infrarsi.knobs.loop import STEP_CALLS, backward_receiver, loop_role, mentions_backward
from infrarsi.knobs.source import ParsedFile, dotted, walk

Ref = tuple[str, bool, bool]
"""(symbol, inverted, scaled)."""

# Calls whose result is a size, not the value: flows stop there.
_SIZE_CALLS = {"size", "numel", "dim", "len", "ndimension", "item_size"}
_SHAPE_CALLS = {"view", "reshape", "randn", "rand", "zeros", "ones", "empty", "full", "expand", "new_zeros",
                "new_ones", "new_empty", "randn_like", "normal", "Tensor", "FloatTensor", "LongTensor"}
_HARMLESS = {"print", "print0", "info", "debug", "warning", "log", "write", "format", "isinstance", "str", "repr",
             "add_scalar", "add_scalars", "set_description", "set_postfix"}
_SEED = {"manual_seed", "manual_seed_all", "seed", "set_seed", "seed_everything"}
_OPTIM_KW = {"lr", "learning_rate", "betas", "weight_decay", "momentum", "eps", "max_norm", "gamma", "step_size",
             "T_max", "max_lr", "total_steps", "lr_lambda", "dampening", "rho", "alpha"}
_DATA = {"open", "memmap", "fromfile", "load", "glob", "join", "load_dataset", "load_from_disk", "listdir",
         "read_csv", "loadtxt", "ImageFolder", "MNIST", "CIFAR10", "CIFAR100", "FakeData", "LSUN", "from_pretrained",
         "from_config", "Subset", "random_split", "tokenize", "encode"}
_LOADER_DATA_KW = {"shuffle", "sampler", "batch_sampler", "drop_last", "collate_fn", "generator"}
_GUARDED_OPS = {
    "compile": "compile",
    "checkpoint": "activation_checkpointing",
    "checkpoint_sequential": "activation_checkpointing",
    "gradient_checkpointing_enable": "activation_checkpointing",
    "autocast": "dtype",
    "GradScaler": "dtype",
    "scaled_dot_product_attention": "attention_impl",
    "flash_attn_func": "attention_impl",
    "set_float32_matmul_precision": "matmul_precision",
    "ZeroRedundancyOptimizer": "fsdp",
    "FullyShardedDataParallel": "fsdp",
    "FSDP": "fsdp",
    "fully_shard": "fsdp",
    "set_num_threads": "threads",
}
_KEYWORD_OPS = {
    "foreach": "optimizer_impl",
    "fused": "optimizer_impl",
    "bucket_cap_mb": "ddp_bucket_mb",
    "gradient_as_bucket_view": "ddp_grad_as_bucket_view",
    "static_graph": "ddp_static_graph",
    "set_to_none": "zero_grad",
}
LOADER_KEYWORDS = {"num_workers": "dataloader_workers", "pin_memory": "dataloader_pin_memory",
                   "prefetch_factor": "dataloader_prefetch", "persistent_workers": "dataloader_persistent"}
"""DataLoader keywords that change how fast the data arrives, never what it is, by role."""
_BINARY: dict[type[cst.BaseAugOp], Callable[[], cst.BaseBinaryOp]] = {cst.DivideAssign: cst.Divide, cst.FloorDivideAssign: cst.FloorDivide, cst.MultiplyAssign: cst.Multiply,
           cst.SubtractAssign: cst.Subtract}
_SPEED_KEYWORDS = {*_KEYWORD_OPS, *LOADER_KEYWORDS, "mode", "backend"}
_TORCH_DTYPES = {"float32", "float16", "bfloat16", "float", "half", "float64", "double"}


WORLD_SIZE = "w:world_size"
"""The symbol the job's process count starts at (``os.environ["WORLD_SIZE"]``, ``dist.get_world_size()``):
an accumulation count it divides counts the micro-batches of every rank (nanoGPT's
``gradient_accumulation_steps //= ddp_world_size``)."""
WORLD_SIZE_VARS = ("WORLD_SIZE",)


@dataclass(frozen=True, slots=True)
class Sink:
    kind: str
    """A role (``threads``, ``compile``…), ``batch`` / ``eval_batch`` (the leading dimension of the data),
    ``accumulation`` (bounds the loop around backward or divides the loss), ``logging``, or
    ``workload:<aspect>`` (model, optim, seed, data, loss, steps)."""
    where: str
    refs: frozenset[Ref]
    constants: tuple = ()
    """For guards: the constants the value is compared with (``zero_stage == 1``)."""


@dataclass(frozen=True, slots=True)
class Reach:
    """One sink a knob's value reaches, with how it got there."""

    kind: str
    where: str
    inverted: bool
    scaled: bool
    constants: tuple = ()


@dataclass(slots=True)
class FlowGraph:
    edges: dict[str, set[Ref]] = field(default_factory=dict)
    sinks: list[Sink] = field(default_factory=list)
    has_accumulation: bool = False
    """Some loop around backward() is bounded by a variable, or the loss is divided before backward()."""
    divisions: list[tuple[str, frozenset[str], frozenset[str]]] = field(default_factory=list)
    """Each ``n //= d`` / ``m = n // d`` on a name: (``file:line``, what is divided, the divisor's
    symbols), for saying where a count is divided by another (the process count)."""

    logged: list[Sink] = field(default_factory=list)
    """Where values are printed or logged (``print``, ``logger.info``, ``wandb.log``…): no role comes of
    it; init shows a batch setting's logging-only uses (a printed tokens-per-iteration, an MFU
    estimate) to say they do not lock it."""

    def symbols(self, sources: list[str]) -> set[str]:
        """Every symbol a value from ``sources`` reaches, whatever the path's polarity."""
        seen, queue = set(sources), deque(sources)
        while queue:
            for dst, _, _ in self.edges.get(queue.popleft(), ()):
                if dst not in seen:
                    seen.add(dst)
                    queue.append(dst)
        return seen

    def add_edge(self, src: Ref, dst: str) -> None:
        self.edges.setdefault(src[0], set()).add((dst, src[1], src[2]))

    def reach(self, sources: list[str]) -> list[Reach]:
        """Every sink reached from ``sources``, with the polarity of the path."""
        seen: dict[str, set[tuple[bool, bool]]] = {}
        queue = deque((s, False, False) for s in sources)
        while queue:
            sym, inv, sca = queue.popleft()
            if (inv, sca) in seen.setdefault(sym, set()):
                continue
            seen[sym].add((inv, sca))
            for dst, e_inv, e_sca in self.edges.get(sym, ()):
                queue.append((dst, inv ^ e_inv, sca or e_sca))
        out = []
        for sink in self.sinks:
            for sym, inv, sca in sink.refs:
                for h_inv, h_sca in seen.get(sym, ()):
                    out.append(Reach(sink.kind, sink.where, h_inv ^ inv, h_sca or sca, sink.constants))
        return list(dict.fromkeys(out))


@dataclass(frozen=True, slots=True)
class _Function:
    file: str
    qual: str
    params: tuple[str, ...]
    node: cst.FunctionDef
    is_method: bool


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _calls_in(node: cst.CSTNode) -> list[str]:
    return [dotted(n.func) or (n.func.attr.value if isinstance(n.func, cst.Attribute) else "")
            for n in walk(node) if isinstance(n, cst.Call)]


class _Builder:
    """Collects the flow edges and sinks of a set of files in one walk of each."""

    def __init__(self, files: list[ParsedFile]):
        self.files = files
        self.g = FlowGraph()
        self.functions: dict[str, list[_Function]] = {}
        self.classes: dict[str, tuple[ParsedFile, cst.ClassDef]] = {}
        self.loss_names: dict[str, set[str]] = {}
        self.locals: dict[str, set[str]] = {}
        """Names each function binds (parameters, assignments, loop targets): other names are module-level."""
        self.modules: set[str] = set()
        """Names of the job's nn.Module subclasses."""
        for f in files:
            self._index(f, f.module.body, "", in_class=False)
        for f in files:
            self.file = f
            self._block(f.module.body, "", loops=())

    # --- index ---------------------------------------------------------------------------

    def _index(self, f: ParsedFile, body: Sequence[cst.CSTNode], prefix: str, in_class: bool) -> None:
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef):
                qual = f"{prefix}{stmt.name.value}"
                params = tuple(p.name.value for p in [*stmt.params.posonly_params, *stmt.params.params,
                                                       *stmt.params.kwonly_params])
                self.functions.setdefault(stmt.name.value, []).append(_Function(f.rel, qual, params, stmt, in_class))
                self.locals[qual] = set(params) | _assigned_names(stmt)
                self._index(f, stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else (), qual + ".", False)
            elif isinstance(stmt, cst.ClassDef):
                self.classes[stmt.name.value] = (f, stmt)
                if any(_last(dotted(b.value)) == "Module" for b in stmt.bases):
                    self.modules.add(stmt.name.value)
                self._index(f, stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else (),
                            f"{prefix}{stmt.name.value}.", True)

    # --- symbols -------------------------------------------------------------------------

    def _name(self, func: str, name: str) -> str:
        return f"n:{self.file.rel}:{func}:{name}"

    def _key(self, func: str, dict_name: str, key: str) -> str:
        return f"k:{self.file.rel}:{func}:{dict_name}:{key}"

    def refs(self, node: cst.CSTNode | None, func: str) -> set[Ref]:
        """The symbols an expression's value comes from."""
        if node is None:
            return set()
        if isinstance(node, cst.Name):
            if node.value == "_":
                return set()
            if func and node.value in self.locals.get(func, ()):
                return {(self._name(func, node.value), False, False)}
            return {(self._name("", node.value), False, False)}
        if isinstance(node, cst.CompFor):
            out = self.refs(node.iter, func)
            for cond in node.ifs:
                out |= self.refs(cond.test, func)
            return out | self.refs(node.inner_for_in, func)
        if isinstance(node, cst.Attribute):
            if node.attr.value == "shape":
                return set()
            return {(f"a:{node.attr.value}", False, False)}
        if isinstance(node, cst.BinaryOperation):
            left, right = self.refs(node.left, func), self.refs(node.right, func)
            if isinstance(node.operator, (cst.Divide, cst.FloorDivide)):
                return {(s, i, True) for s, i, _ in left} | {(s, not i, c) for s, i, c in right}
            return left | right
        if isinstance(node, cst.Subscript):
            out = self.refs(node.value, func)
            if _last(dotted(node.value)) == "environ" and _const_key(node) in WORLD_SIZE_VARS:
                out.add((WORLD_SIZE, False, False))
            if isinstance(node.value, cst.Name):
                key = _const_key(node)
                if key is not None:
                    out |= {(self._key(func, node.value.value, key), False, False)}
            for el in node.slice:
                if isinstance(el.slice, cst.Index):
                    out |= self.refs(el.slice.value, func)
            return out
        if isinstance(node, cst.Call):
            return self._call_refs(node, func)
        if isinstance(node, (cst.Lambda, cst.FunctionDef)):
            return set()
        out = set()
        for child in node.children:
            if isinstance(child, cst.CSTNode):
                out |= self.refs(child, func)
        return out

    def _call_refs(self, node: cst.Call, func: str) -> set[Ref]:
        name = dotted(node.func)
        short = _last(name) if name else (node.func.attr.value if isinstance(node.func, cst.Attribute) else "")
        if short in _SIZE_CALLS or short in _HARMLESS:
            return set()
        if short == "get_world_size" or short in ("get", "getenv") and node.args \
                and isinstance(node.args[0].value, cst.SimpleString) \
                and node.args[0].value.evaluated_value in WORLD_SIZE_VARS:
            return {(WORLD_SIZE, False, False)}
        if short in self.functions or short in self.classes:
            return {(f"r:{short}", False, False)}
        out: set[Ref] = set()
        if isinstance(node.func, cst.Attribute):
            out |= self.refs(node.func.value, func)
        sizes = _size_args(node, short)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in _SPEED_KEYWORDS:
                continue  # how the call runs, not what it returns: the result carries no such value
            if any(arg is s for s in sizes):
                continue  # a shape the result is given, not a value it holds: the flow ends at its sink
            out |= self.refs(arg.value, func)
        return out

    # --- statements ----------------------------------------------------------------------

    def _block(self, body: Sequence[cst.CSTNode], func: str, loops: tuple[cst.For | cst.While, ...]) -> None:
        for stmt in body:
            self._stmt(stmt, func, loops)

    def _stmt(self, stmt: cst.CSTNode, func: str, loops: tuple[cst.For | cst.While, ...]) -> None:
        if isinstance(stmt, cst.FunctionDef):
            qual = f"{func}.{stmt.name.value}" if func else stmt.name.value
            qual = self._qual_of(stmt) or qual
            self._block(stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else (), qual, ())
            return
        if isinstance(stmt, cst.ClassDef):
            self._block(stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else (), func, loops)
            return
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self._small(small, func, stmt)
            return
        if isinstance(stmt, cst.If):
            self._guard(stmt.test, stmt, func)
            self._block(stmt.body.body, func, loops)
            if stmt.orelse is not None:
                other = stmt.orelse
                if isinstance(other, cst.If):
                    self._stmt(other, func, loops)
                else:
                    self._block(other.body.body, func, loops)
            return
        if isinstance(stmt, cst.For):
            it: cst.BaseExpression = stmt.iter
            target: cst.BaseExpression = stmt.target
            if isinstance(it, cst.Call) and dotted(it.func) == "enumerate" and isinstance(target, cst.Tuple) \
                    and len(target.elements) == 2 and it.args:
                target = target.elements[1].value  # the counter carries no value of the data
                it = it.args[0].value
            self._assign(target, self.refs(it, func), func)
            self._loop(stmt, func, outer=bool(loops))
            self._expr_sinks(stmt.iter, func)
            self._block(stmt.body.body, func, (*loops, stmt))
            return
        if isinstance(stmt, cst.While):
            self._guard(stmt.test, stmt, func)
            self._block(stmt.body.body, func, (*loops, stmt))
            return
        if isinstance(stmt, cst.With):
            for item in stmt.items:
                self._expr_sinks(item.item, func)
                if item.asname is not None:
                    self._assign(item.asname.name, self.refs(item.item, func), func)
            self._block(stmt.body.body, func, loops)
            return
        if isinstance(stmt, cst.Try):
            self._block(stmt.body.body, func, loops)
            for h in stmt.handlers:
                self._block(h.body.body, func, loops)
            for extra in (stmt.orelse, stmt.finalbody):
                if extra is not None:
                    self._block(extra.body.body, func, loops)

    def _qual_of(self, node: cst.FunctionDef) -> str:
        for f in self.functions.get(node.name.value, ()):
            if f.node is node:
                return f.qual
        return ""

    def _small(self, small: cst.CSTNode, func: str, line: cst.CSTNode) -> None:
        if isinstance(small, cst.Assign):
            value = self.refs(small.value, func)
            op = small.value
            if isinstance(op, cst.BinaryOperation) and isinstance(op.operator, (cst.Divide, cst.FloorDivide)):
                self._division(small, self.refs(op.left, func), self.refs(op.right, func))
            if isinstance(small.value, cst.BinaryOperation):
                for t in small.targets:
                    self._loss_arith(t.target, small.value, func)
            for t in small.targets:
                self._assign(t.target, value, func, small.value)
            self._expr_sinks(small.value, func)
            for t in small.targets:
                self._store_sinks(t.target, small.value, func)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            self._assign(small.target, self.refs(small.value, func), func, small.value)
            self._expr_sinks(small.value, func)
        elif isinstance(small, cst.AugAssign):
            value = self.refs(small.value, func)
            if isinstance(small.operator, (cst.DivideAssign, cst.FloorDivideAssign)):
                self._division(small, self.refs(small.target, func), value)
                value = {(s, not i, c) for s, i, c in value}
            self._loss_arith(small.target, cst.BinaryOperation(small.target, _BINARY.get(
                type(small.operator), cst.Add)(), small.value), func)
            self._assign(small.target, value, func)
            self._expr_sinks(small.value, func)
        elif isinstance(small, cst.Return) and small.value is not None:
            name = func.rsplit(".", 1)[-1]
            for r in self.refs(small.value, func):
                self.g.add_edge(r, f"r:{name}")
            self._expr_sinks(small.value, func)
        elif isinstance(small, cst.Expr):
            self._update(small.value, func)
            self._expr_sinks(small.value, func)

    def _assign(self, target: cst.CSTNode, value: set[Ref], func: str, node: cst.CSTNode | None = None) -> None:
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(node, (cst.Tuple, cst.List)) \
                and len(target.elements) == len(node.elements):
            for t, v in zip(target.elements, node.elements, strict=True):
                self._assign(t.value, self.refs(v.value, func), func, v.value)
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            for t in target.elements:
                self._assign(t.value, value, func)
            return
        if isinstance(target, cst.StarredElement):
            self._assign(target.value, value, func)
            return
        if isinstance(target, cst.Name):
            dst = self._name(func, target.value)
            for r in value:
                self.g.add_edge(r, dst)
            if func and self._is_global(func, target.value):
                for r in value:
                    self.g.add_edge(r, self._name("", target.value))
            if isinstance(node, cst.Dict):
                self._dict_keys(target.value, node, func)
            elif isinstance(node, cst.Call) and dotted(node.func) == "dict":
                for arg in node.args:
                    if arg.keyword is not None:
                        for r in self.refs(arg.value, func):
                            self.g.add_edge(r, self._key(func, target.value, arg.keyword.value))
            return
        if isinstance(target, cst.Attribute):
            for r in value:
                self.g.add_edge(r, f"a:{target.attr.value}")
            return
        if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            key = _const_key(target)
            if key is not None:
                for r in value:
                    self.g.add_edge(r, self._key(func, target.value.value, key))
            for r in value:
                self.g.add_edge(r, self._name(func, target.value.value))

    def _division(self, node: cst.CSTNode, numerator: set[Ref], divisor: set[Ref]) -> None:
        if numerator and divisor:
            self.g.divisions.append((self.file.where(node), frozenset(r[0] for r in numerator),
                                     frozenset(r[0] for r in divisor)))

    def _update(self, node: cst.CSTNode, func: str) -> None:
        """``d.update({...})`` / ``d.update(other)`` adds keys to ``d``."""
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "update" and isinstance(node.func.value, cst.Name) and node.args):
            return
        name, arg = node.func.value.value, node.args[0].value
        if isinstance(arg, cst.Dict):
            self._dict_keys(name, arg, func)
        elif isinstance(arg, cst.Name):
            for key, sym in list(self._dict_symbols(func, arg.value)):
                self.g.add_edge((sym, False, False), self._key(func, name, key))
        for a in node.args:
            if a.keyword is not None:
                for r in self.refs(a.value, func):
                    self.g.add_edge(r, self._key(func, name, a.keyword.value))

    def _is_global(self, func: str, name: str) -> bool:
        for f in self.functions.get(func.rsplit(".", 1)[-1], ()):
            for node in walk(f.node):
                if isinstance(node, cst.Global) and any(n.name.value == name for n in node.names):
                    return True
        return False

    def _dict_keys(self, name: str, node: cst.Dict, func: str) -> None:
        for el in node.elements:
            if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString):
                key = el.key.evaluated_value
                if isinstance(key, str):
                    for r in self.refs(el.value, func):
                        self.g.add_edge(r, self._key(func, name, key))

    # --- sinks ---------------------------------------------------------------------------

    def _sink(self, kind: str, node: cst.CSTNode, refs: set[Ref], constants: tuple[int | str, ...] = ()) -> None:
        if refs:
            self.g.sinks.append(Sink(kind, self.file.where(node), frozenset(refs), constants))

    def _store_sinks(self, target: cst.CSTNode, value: cst.CSTNode, func: str) -> None:
        if isinstance(target, cst.Subscript) and _const_key(target) == "lr":
            self._sink("workload:optim", target, self.refs(value, func))
        if isinstance(target, cst.Attribute) and target.attr.value in ("allow_tf32",):
            self._sink("matmul_precision", target, self.refs(value, func))
        if isinstance(target, cst.Attribute) and target.attr.value == "benchmark":
            self._sink("cudnn_benchmark", target, self.refs(value, func))

    def _expr_sinks(self, node: cst.CSTNode, func: str) -> None:
        for n in walk(node):
            if isinstance(n, cst.Call):
                self._call_sinks(n, func)
            elif isinstance(n, cst.IfExp):
                self._guard(n.test, n, func, body=(n.body, n.orelse))
            elif isinstance(n, cst.BinaryOperation):
                self._loss_arith(n.left, n, func)
            elif isinstance(n, cst.Subscript) and any(isinstance(el.slice, cst.Slice) for el in n.slice):
                for el in n.slice:
                    if isinstance(el.slice, cst.Slice):
                        for bound in (el.slice.lower, el.slice.upper):
                            self._sink("batch", n, self.refs(bound, func))
            elif isinstance(n, cst.Subscript) and isinstance(n.value, cst.Dict) and _dict_of_dtypes(n.value):
                for el in n.slice:
                    if isinstance(el.slice, cst.Index):
                        self._sink("dtype", n, self.refs(el.slice.value, func))

    def _call_sinks(self, call: cst.Call, func: str) -> None:
        name = dotted(call.func)
        receiver = backward_receiver(call)
        if receiver is not None:
            if isinstance(receiver, cst.BinaryOperation) and isinstance(receiver.operator, cst.Divide) \
                    and not isinstance(receiver.right, (cst.Integer, cst.Float)):
                self.g.has_accumulation = True  # (loss / n).backward()
                self._sink("accumulation", receiver, self.refs(receiver.right, func))
        short = _last(name) if name else (call.func.attr.value if isinstance(call.func, cst.Attribute) else "")
        kw = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        pos = [a.value for a in call.args if a.keyword is None and not a.star]
        stars = [a.value for a in call.args if a.star == "**" and isinstance(a.value, cst.Name)]
        if short in self.functions or short in self.classes:
            self._bind(short, call, pos, kw, stars, func)
        if short in _HARMLESS:
            refs = {r for a in call.args for r in self.refs(a.value, func)}
            if refs:
                self.g.logged.append(Sink("logging", self.file.where(call), frozenset(refs)))
            return
        if short == "getattr" and len(pos) >= 2 and dotted(pos[0]) == "torch":
            self._sink("dtype", call, self.refs(pos[1], func))
        if short in ("set_num_threads", "set_num_interop_threads") and pos:
            self._sink("threads", call, self.refs(pos[0], func))
        for key, role in _KEYWORD_OPS.items():
            if key in kw:
                self._sink(role, call, self.refs(kw[key], func))
        if short in ("autocast", "GradScaler") or (short == "to" and "dtype" in kw):
            for key in ("dtype", "enabled"):
                if key in kw:
                    self._sink("dtype", call, self.refs(kw[key], func))
        if short in ("compile",) and "torch" in name:
            for key in ("mode", "backend", "fullgraph", "dynamic"):
                if key in kw:
                    self._sink("compile", call, self.refs(kw[key], func))
        if short == "map" and "num_proc" in kw:
            self._sink("preprocessing_workers", call, self.refs(kw["num_proc"], func))
        if short in _SEED and ("random" in name or "torch" in name or "seed" in short):
            for a in call.args:
                self._sink("workload:seed", call, self.refs(a.value, func))
        for key in _OPTIM_KW & kw.keys():
            self._sink("workload:optim", call, self.refs(kw[key], func))
        if name.startswith(("optim.", "torch.optim.")) or short.startswith("clip_grad"):
            for a in call.args:
                if a.star == "**" and isinstance(a.value, cst.Name):
                    for key, sym in list(self._dict_symbols(func, a.value.value)):
                        self._sink(_KEYWORD_OPS.get(key, "workload:optim"), call, {(sym, False, False)})
                elif a.keyword is None or a.keyword.value not in _KEYWORD_OPS:
                    self._sink("workload:optim", call, self.refs(a.value, func))
        if (name.startswith(("nn.", "torch.nn.")) and not any(x in name for x in ("parallel", "utils", "functional"))) \
                or short in self.modules:
            for a in call.args:
                self._sink("workload:model", call, self.refs(a.value, func))
        if short in _DATA or name.startswith(("datasets.", "dset.", "torchvision.datasets.")):
            for a in call.args:
                self._sink("workload:data", call, self.refs(a.value, func))
        if short == "DataLoader":
            self._loader(call, kw, pos, stars, func)
        if short in _SHAPE_CALLS or short == "randint":
            self._shape(call, short, pos, kw, func)
        if short == "slice":
            for p in pos:
                self._sink("batch", call, self.refs(p, func))

    def _shape(self, call: cst.Call, short: str, pos: list[cst.BaseExpression], kw: dict[str, cst.BaseExpression],
               func: str) -> None:
        if short == "randint":
            size = kw.get("size") or (pos[2] if len(pos) >= 3 else pos[1] if len(pos) == 2 else None)
            bounds = [p for p in pos if p is not size]
            for b in bounds:
                self._sink("workload:data", call, self.refs(b, func))
            dims = [d.value for d in size.elements] if isinstance(size, (cst.Tuple, cst.List)) else []
        else:
            dims = pos
            if len(pos) == 1 and isinstance(pos[0], (cst.Tuple, cst.List)):
                dims = [e.value for e in pos[0].elements]
        if not dims:
            return
        if len(dims) == 1 and short != "randint":  # a vector's length: a model size, not a batch
            self._sink("workload:model", call, self.refs(dims[0], func))
            return
        self._sink("batch", call, self.refs(dims[0], func))
        for d in dims[1:]:
            self._sink("workload:model", call, self.refs(d, func))

    def _loader(self, call: cst.Call, kw: dict[str, cst.BaseExpression], pos: list[cst.BaseExpression],
                stars: list[cst.Name], func: str) -> None:
        keys: dict[str, set[Ref]] = {k: self.refs(v, func) for k, v in kw.items()}
        for star in stars:
            for sym in list(self._dict_symbols(func, star.value)):
                keys.setdefault(sym[0], set()).add((sym[1], False, False))
        if len(pos) >= 2:
            keys.setdefault("batch_size", set()).update(self.refs(pos[1], func))
        training = self._loader_trains(call, func)
        for key, refs in keys.items():
            if key == "batch_size":
                self._sink("batch" if training else "eval_batch", call, refs)
            elif key in LOADER_KEYWORDS:
                self._sink(LOADER_KEYWORDS[key], call, refs)
            elif key in _LOADER_DATA_KW:
                self._sink("workload:data", call, refs)

    def _dict_symbols(self, func: str, name: str) -> Iterator[tuple[str, str]]:
        """(key, symbol) for every key the graph knows of dict ``name`` in ``func``."""
        prefix = f"k:{self.file.rel}:{func}:{name}:"
        known = {dst for targets in self.g.edges.values() for dst, _, _ in targets}
        for sym in known:
            if sym.startswith(prefix):
                yield sym[len(prefix):], sym

    def _loader_trains(self, call: cst.Call, func: str) -> bool:
        """Whether the batches of this DataLoader reach backward(): False only when every use of the
        name it is bound to is an evaluation (a loop or a job function without backward())."""
        owner = self._enclosing(func)
        if owner is None:
            return True
        bound = None
        for node in walk(owner):
            if isinstance(node, cst.Assign) and node.value is call and isinstance(node.targets[0].target, cst.Name):
                bound = node.targets[0].target.value
        if bound is None:
            return True
        uses = []
        for node in walk(owner):
            if isinstance(node, cst.For) and bound in {n.value for n in walk(node.iter) if isinstance(n, cst.Name)}:
                uses.append(mentions_backward(node))
            elif isinstance(node, cst.Call) and any(isinstance(a.value, cst.Name) and a.value.value == bound
                                                    for a in node.args):
                callee = _last(dotted(node.func))
                if callee in self.functions:
                    uses.append(any(mentions_backward(f.node) for f in self.functions[callee]))
                elif callee not in ("enumerate", "iter", "len", "zip"):
                    uses.append(True)
        return not uses or any(uses)

    def _enclosing(self, func: str) -> cst.CSTNode | None:
        if not func:
            return self.file.module
        for f in self.functions.get(func.rsplit(".", 1)[-1], ()):
            if f.qual == func and f.file == self.file.rel:
                return f.node
        return None

    def _bind(self, short: str, call: cst.Call, pos: list[cst.BaseExpression], kw: dict[str, cst.BaseExpression],
              stars: list[cst.Name], func: str) -> None:
        """Arguments of a call to the job's own function or class flow into its parameters."""
        targets: list[tuple[str, str, tuple[str, ...]]] = []
        for f in self.functions.get(short, ()):
            params = f.params[1:] if f.is_method and f.params[:1] in (("self",), ("cls",)) else f.params
            targets.append((f.file, f.qual, params))
        if short in self.classes:
            init = [f for f in self.functions.get("__init__", ()) if f.qual == f"{short}.__init__"]
            for f in init:
                targets.append((f.file, f.qual, f.params[1:]))
            for a in call.args:
                if a.keyword is not None:  # dataclass fields: config.<field> loads carry the value
                    for r in self.refs(a.value, func):
                        self.g.add_edge(r, f"a:{a.keyword.value}")
            for star in stars:
                for key, sym in list(self._dict_symbols(func, star.value)):
                    self.g.add_edge((sym, False, False), f"a:{key}")
        for file, qual, params in targets:
            for i, value in enumerate(pos):
                if i < len(params):
                    for r in self.refs(value, func):
                        self.g.add_edge(r, f"n:{file}:{qual}:{params[i]}")
            for key, value in kw.items():
                if key in params:
                    for r in self.refs(value, func):
                        self.g.add_edge(r, f"n:{file}:{qual}:{key}")

    def _guard(self, test: cst.BaseExpression, node: cst.CSTNode, func: str,
               body: tuple[cst.CSTNode, ...] | None = None) -> None:
        """A condition acts through what it guards: a speed switch, logging, or the workload."""
        refs = self.refs(test, func)
        if not refs:
            return
        parts = body if body is not None else _branches(node)
        calls = [c for part in parts for c in _calls_in(part)]
        constants = tuple(_compared_constants(test))
        roles = [_GUARDED_OPS[_last(c)] for c in calls if _last(c) in _GUARDED_OPS
                 and (_last(c) != "compile" or "torch" in c or "." in c)]
        stmts = [n for part in parts for n in _walk_unguarded(part)]
        if roles:
            self._sink(roles[0], node, refs, constants)
            return
        if any(isinstance(n, (cst.Break, cst.Return, cst.Continue)) for n in stmts) or \
                any(_last(c) in ("exit", "_exit") for c in calls):
            self._sink("workload:steps", node, refs, constants)
            return
        shorts = {_last(c) for c in calls}
        if any(s in self.modules or s in _DATA or s in _SEED for s in shorts) or any(
                c.startswith(("nn.", "torch.nn.", "optim.", "torch.optim.")) for c in calls):
            self._sink("workload:model", node, refs, constants)
            return
        if shorts & STEP_CALLS:
            self._sink("accumulation" if _is_modulo(test) else "workload:steps", node, refs, constants)
            if _is_modulo(test):
                self.g.has_accumulation = True
            return
        if calls and shorts <= (_HARMLESS | {"item", "time", "perf_counter", "get_lr", "mean", "float", "tolist",
                                             "cpu", "flush", "log_dict", "get_last_lr", "len", "int", "round",
                                             "sum", "max", "min", "abs"}) \
                and _is_modulo(test):
            self._sink("logging", node, refs, constants)

    def _loop(self, loop: cst.For, func: str, outer: bool) -> None:
        """``for _ in range(n)`` around backward(), inside another loop and calling no ``step()``, is
        accumulation; any other counts steps (``knobs.loop.loop_role``)."""
        it = loop.iter
        if not (isinstance(it, cst.Call) and dotted(it.func) == "range"):
            return
        role = loop_role(loop, nested=outer)
        if not role:
            return
        refs: set[Ref] = set()
        for a in it.args:
            refs |= self.refs(a.value, func)
        if role == "steps":
            self._sink("workload:steps", loop, refs)
        else:
            self.g.has_accumulation = True
            self._sink("accumulation", loop, refs)

    def _loss_arith(self, name: cst.CSTNode, op: cst.BinaryOperation, func: str) -> None:
        """Arithmetic on the loss before backward(): ``loss / n`` is accumulation's normalisation;
        any other operand (``loss * k``, ``loss + k * aux``) changes what is optimised."""
        if not isinstance(name, cst.Name) or name.value not in self._losses(func):
            return
        losses = self._losses(func)
        left_is_loss = isinstance(op.left, cst.Name) and op.left.value in losses
        right_is_loss = isinstance(op.right, cst.Name) and op.right.value in losses
        other = op.left if right_is_loss and not left_is_loss else op.right
        if isinstance(op.operator, cst.Divide) and other is op.right:
            if not isinstance(other, (cst.Integer, cst.Float)):
                self.g.has_accumulation = True
                self._sink("accumulation", other, self.refs(other, func))
        else:
            self._sink("workload:loss", op, self.refs(other, func))

    def _losses(self, func: str) -> set[str]:
        """Names ``.backward()`` is called on in ``func``."""
        if func not in self.loss_names:
            owner = self._enclosing(func)
            names = set()
            for node in walk(owner) if owner is not None else ():
                receiver = backward_receiver(node)
                if receiver is not None:
                    if isinstance(receiver, cst.Call) and _last(dotted(receiver.func)) == "scale" and receiver.args:
                        receiver = receiver.args[0].value  # scaler.scale(loss).backward()
                    if isinstance(receiver, cst.Name):
                        names.add(receiver.value)
            self.loss_names[func] = names
        return self.loss_names[func]


_SIZE_ONLY = {"view", "reshape", "randn", "rand", "zeros", "ones", "empty", "expand", "new_zeros", "new_ones",
              "new_empty"}
"""Calls whose positional arguments are all sizes of the tensor they return."""


def _size_args(call: cst.Call, short: str) -> list[cst.Arg]:
    """The arguments of ``call`` that give its result's shape (the data's leading dimension and the
    others), not its values: ``torch.randint(n, (B,))``'s size, ``x.view(B, T)``'s dims,
    ``DataLoader(ds, batch_size=B)``'s batch size. A batch size acts there (a ``batch`` sink); the
    data it shapes, and what is computed from the data (a loss, a best validation loss a
    checkpoint is saved under), does not carry it on."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    named = [a for a in call.args if a.keyword is not None and a.keyword.value in ("size", "batch_size")]
    if short in _SIZE_ONLY:
        return [*positional, *named]
    if short == "randint":
        return [*(positional[2:3] if len(positional) >= 3 else positional[1:2]), *named]
    if short == "full":
        return [*positional[:1], *named]
    if short == "DataLoader":
        return [*positional[1:2], *named]
    return []


def _walk_unguarded(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``walk`` that does not enter nested ``if`` statements: they are guards of their own."""
    yield node
    for child in node.children:
        if not isinstance(child, cst.If):
            yield from _walk_unguarded(child)


def _assigned_names(func: cst.FunctionDef) -> set[str]:
    out = set()
    for node in walk(func.body):
        targets = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            targets = [node.target]
        elif isinstance(node, (cst.For, cst.CompFor)):
            targets = [node.target]
        elif isinstance(node, cst.AsName):
            targets = [node.name]
        for t in targets:
            out |= {n.value for n in walk(t) if isinstance(n, cst.Name)}
    return out


def _branches(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    if isinstance(node, cst.If):
        out = [node.body]
        if node.orelse is not None and not isinstance(node.orelse, cst.If):
            out.append(node.orelse.body)
        return tuple(out)
    if isinstance(node, cst.While):
        return (node.body,)
    return ()


def _is_modulo(test: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo) for n in walk(test))


def _compared_constants(test: cst.CSTNode) -> Iterator[int | str]:
    for n in walk(test):
        if isinstance(n, cst.Comparison):
            for side in [n.left, *(c.comparator for c in n.comparisons)]:
                if isinstance(side, cst.Integer):
                    yield int(side.value)
                elif isinstance(side, cst.SimpleString) and isinstance(side.evaluated_value, str):
                    yield side.evaluated_value


def _const_key(node: cst.Subscript) -> str | None:
    if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        value = node.slice[0].slice.value
        if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
            return value.evaluated_value
    return None


def _dict_of_dtypes(node: cst.Dict) -> bool:
    values = [dotted(el.value) for el in node.elements if isinstance(el, cst.DictElement)]
    return bool(values) and all(v.startswith("torch.") and _last(v) in _TORCH_DTYPES for v in values)


def build_graph(files: list[ParsedFile]) -> FlowGraph:
    return _Builder(files).g


def knob_sources(name: str, style: str, entry: str, receiver: str = "") -> list[str]:
    """Where a knob's value enters the code: the parameter of the function a CLI library calls with
    it (``receiver``, ``file:function``); else ``x.<name>`` loads (for a config node's leaf, the load
    of its last part: ``config.trainer.max_iters``), and for globals the module name."""
    if receiver:
        return [f"n:{receiver}:{name}"]
    out = [f"a:{name.rsplit('.', 1)[-1] if style == 'nested' else name}"]
    if style == "globals":
        out.append(f"n:{entry}::{name}")
    return out
