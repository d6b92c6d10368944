"""Hand-written causal attention -> ``F.scaled_dot_product_attention(q, k, v, is_causal=True)``.

Recognised, as consecutive statements of one block (the names may differ from step to step):

    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))   # or / math.sqrt(d), matmul, einsum
    [att = att * scale]                                                 # a separate scaling step
    [mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)] # a local mask, if any
    att = att.masked_fill(<causal mask>, float('-inf'))
    att = F.softmax(att, dim=-1)                                        # or att.softmax(-1), torch.softmax
    [att = self.attn_dropout(att)]                                      # or F.dropout(att, p, training)
    y = att @ v                                                         # or matmul, einsum

A mask is causal when it is provably the lower triangle: a ``torch.tril(torch.ones(...))`` buffer
compared with 0, or ``triu(..., diagonal=1)`` of ones, sliced only from the top-left corner (which
is what ``is_causal=True`` means for any query/key lengths). Anything else (a padding mask, a
KV-cache offset, a softmax in another dtype, the weights used after the product) is left alone.
The register_buffer'd mask stays: removing it would change the model's state_dict keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

import libcst as cst
from libcst.codemod import CodemodContext

from infrarsi.patches._cst import (
    arg,
    code,
    dotted,
    functional_prefix,
    int_value,
    leading_lines,
    names_in,
    single_assign,
    strip_parens,
)
from infrarsi.patches.base import Patch, PatchCodemod
from infrarsi.priors.builtin import ATTENTION

_SOFTMAX = {"F.softmax", "torch.softmax", "torch.nn.functional.softmax", "nn.functional.softmax", "functional.softmax"}
_MATMUL = {"torch.matmul", "torch.bmm"}
_NEG_INF = {"float('-inf')", 'float("-inf")', "-float('inf')", '-float("inf")', "-torch.inf", "-math.inf",
            "float('-Inf')", "-np.inf", "-numpy.inf"}


def _is_einsum(node: cst.BaseExpression) -> TypeGuard[cst.Call]:
    return isinstance(node, cst.Call) and dotted(node.func) in ("torch.einsum", "einsum")


def _einsum_spec(call: cst.Call) -> list[str] | None:
    first = call.args[0].value if call.args else None
    if not isinstance(first, cst.SimpleString) or len(call.args) != 3:
        return None
    spec = first.evaluated_value
    if not isinstance(spec, str):  # a bytes literal is no einsum equation
        return None
    spec = spec.replace(" ", "")
    if "->" not in spec or "..." in spec:
        return None
    ins, out = spec.split("->")
    parts = ins.split(",")
    return [*parts, out] if len(parts) == 2 else None


def _qk_einsum(call: cst.Call) -> bool:
    """``prefix i d, prefix j d -> prefix i j``: scores of queries against keys."""
    spec = _einsum_spec(call)
    if spec is None:
        return False
    a, b, out = spec
    if len(a) < 2 or len(a) != len(b) or len(out) != len(a):
        return False
    prefix, i, d, j = a[:-2], a[-2], a[-1], b[-2]
    return b[:-2] == prefix and b[-1] == d and out == prefix + i + j and len({i, j, d}) == 3


def _av_einsum(call: cst.Call) -> bool:
    """``prefix i j, prefix j d -> prefix i d``: weights times values."""
    spec = _einsum_spec(call)
    if spec is None:
        return False
    a, b, out = spec
    if len(a) < 2 or len(a) != len(b) or len(out) != len(a):
        return False
    prefix, i, j, d = a[:-2], a[-2], a[-1], b[-1]
    return b[:-2] == prefix and b[-2] == j and out == prefix + i + d and len({i, j, d}) == 3


def _transposed_key(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``k`` from ``k.transpose(-2, -1)`` (or ``(-1, -2)``, ``(2, 3)``, ``k.mT``)."""
    if isinstance(node, cst.Attribute) and node.attr.value == "mT":
        return node.value
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "transpose":
        dims = {int_value(a.value) for a in node.args}
        if len(node.args) == 2 and dims in ({-2, -1}, {2, 3}):
            return node.func.value
    return None


def _product(node: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """``(left, right)`` of ``left @ right`` or ``torch.matmul(left, right)``."""
    node = strip_parens(node)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
        return node.left, node.right
    if isinstance(node, cst.Call) and dotted(node.func) in _MATMUL and len(node.args) == 2:
        return node.args[0].value, node.args[1].value
    return None


def _scores(node: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """``(q, k)`` from ``q @ k.transpose(-2, -1)`` or the einsum spelling."""
    node = strip_parens(node)
    if _is_einsum(node):
        return (node.args[1].value, node.args[2].value) if _qk_einsum(node) else None
    pair = _product(node)
    if pair is None:
        return None
    key = _transposed_key(strip_parens(pair[1]))
    return (pair[0], key) if key is not None else None


def _split_scale(node: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression | None, bool]:
    """``(unscaled, scale, divide)`` for ``x * s``, ``s * x`` or ``x / d``; else ``(node, None, False)``."""
    node = strip_parens(node)
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Multiply):
            if _scores(node.left) is not None:
                return node.left, node.right, False
            if _scores(node.right) is not None:
                return node.right, node.left, False
        if isinstance(node.operator, cst.Divide) and _scores(node.left) is not None:
            return node.left, node.right, True
    return node, None, False


def _default_dim(node: cst.BaseExpression, q: str, k: str) -> bool:
    """Is ``node`` the head dimension SDPA defaults to (``k.size(-1)``, ``q.shape[-1]``)?"""
    text = code(strip_parens(node)).replace(" ", "")
    return text in {f"{t}.size(-1)" for t in (q, k)} | {f"{t}.shape[-1]" for t in (q, k)}


def _scale_arg(scale: cst.BaseExpression | None, divide: bool, q: str, k: str) -> cst.BaseExpression | None:
    """The ``scale=`` SDPA needs, or None when its default 1/sqrt(head_dim) is the same."""
    if scale is None:
        return cst.Float("1.0")
    s = strip_parens(scale)
    if divide:
        if isinstance(s, cst.Call) and dotted(s.func) == "math.sqrt" and len(s.args) == 1 and _default_dim(s.args[0].value, q, k):
            return None
        if isinstance(s, cst.BinaryOperation) and isinstance(s.operator, cst.Power) and code(s.right) == "0.5" and _default_dim(s.left, q, k):
            return None
        return cst.BinaryOperation(cst.Float("1.0"), cst.Divide(), scale if not isinstance(scale, cst.BinaryOperation) else scale.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
    if isinstance(s, cst.BinaryOperation) and isinstance(s.operator, cst.Divide) and code(s.left) in ("1", "1.0"):
        d = strip_parens(s.right)
        if isinstance(d, cst.Call) and dotted(d.func) == "math.sqrt" and len(d.args) == 1 and _default_dim(d.args[0].value, q, k):
            return None
    if isinstance(s, cst.BinaryOperation) and isinstance(s.operator, cst.Power) and code(s.right).replace(" ", "") == "-0.5" and _default_dim(s.left, q, k):
        return None
    return s


def _is_softmax(node: cst.BaseExpression, src: str) -> bool:
    """``softmax(src, dim=-1)`` in one of its spellings (no dtype= cast)."""
    if not isinstance(node, cst.Call):
        return False
    name = dotted(node.func)
    if name in _SOFTMAX:
        first = arg(node, 0, "input")
        dim = arg(node, 1, "dim")
        extra = len(node.args) > 2
        return isinstance(first, cst.Name) and first.value == src and int_value(dim) == -1 and not extra
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "softmax" and dotted(node.func.value) == src:
        return len(node.args) == 1 and int_value(arg(node, 0, "dim")) == -1
    return False


def _tensor_shape(node: cst.BaseExpression) -> str | None:
    """'tril' / 'triu1' for a matrix of ones cut to a triangle, through views, casts and top-left slices."""
    node = strip_parens(node)
    if isinstance(node, cst.Subscript):
        for element in node.slice:
            s = element.slice
            if isinstance(s, cst.Index) and code(s.value) == "None":
                continue
            if not (isinstance(s, cst.Slice) and s.lower is None and s.step is None):
                return None
        return _tensor_shape(node.value)
    if not isinstance(node, cst.Call):
        return None
    name = dotted(node.func)
    if name in ("torch.tril", "torch.triu"):
        inner = arg(node, 0, "input")
        diagonal = int_value(arg(node, 1, "diagonal")) or 0
        return _triangle(name.rsplit(".", 1)[1], diagonal, inner)
    if isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        if method in ("tril", "triu"):
            diagonal = int_value(arg(node, 0, "diagonal")) or 0
            return _triangle(method, diagonal, node.func.value)
        if method in ("view", "reshape", "bool", "to", "unsqueeze", "expand", "float", "contiguous"):
            return _tensor_shape(node.func.value)
    return None


def _triangle(kind: str, diagonal: int, inner: cst.BaseExpression | None) -> str | None:
    inner = strip_parens(inner) if inner is not None else None
    if not (isinstance(inner, cst.Call) and dotted(inner.func) in ("torch.ones", "torch.ones_like")):
        return None
    if kind == "tril" and diagonal == 0:
        return "tril"
    if kind == "triu" and diagonal == 1:
        return "triu1"
    return None


class _Masks:
    """Resolves mask expressions: buffers registered in the class, locals assigned in the block."""

    def __init__(self, buffers: dict[str, cst.BaseExpression], local: dict[str, tuple[int, cst.BaseExpression]]):
        self.buffers = buffers
        self.local = local
        self.used_local: int | None = None

    def shape(self, node: cst.BaseExpression) -> str | None:
        node = strip_parens(node)
        base = _base(node)
        name = dotted(base)
        if name and name.startswith("self.") and name[5:] in self.buffers:
            return _tensor_shape(_replace_base(node, self.buffers[name[5:]]))
        if isinstance(base, cst.Name) and base.value in self.local:
            index, value = self.local[base.value]
            self.used_local = index
            return _tensor_shape(_replace_base(node, value))
        return _tensor_shape(node)

    def causal(self, cond: cst.BaseExpression) -> bool:
        """Is ``cond`` true exactly above the diagonal (where a causal mask hides keys)?"""
        cond = strip_parens(cond)
        if isinstance(cond, cst.Comparison) and len(cond.comparisons) == 1:
            target = cond.comparisons[0]
            value = code(target.comparator)
            if isinstance(target.operator, cst.Equal) and value in ("0", "0.0", "False"):
                return self.shape(cond.left) == "tril"
            if isinstance(target.operator, cst.Equal) and value in ("1", "1.0", "True"):
                return self.shape(cond.left) == "triu1"
            return False
        if isinstance(cond, cst.UnaryOperation) and isinstance(cond.operator, (cst.BitInvert, cst.Not)):
            return self.shape(cond.expression) == "tril"
        if isinstance(cond, cst.Call) and isinstance(cond.func, cst.Attribute) and cond.func.attr.value == "logical_not":
            return self.shape(cond.func.value) == "tril"
        return self.shape(cond) == "triu1"


_PASS_THROUGH = ("bool", "to", "view")


def _base(node: cst.BaseExpression) -> cst.BaseExpression:
    """The tensor a mask expression starts from, under slices and casts."""
    node = strip_parens(node)
    if isinstance(node, cst.Subscript):
        return _base(node.value)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _PASS_THROUGH:
        return _base(node.func.value)
    return node


def _replace_base(node: cst.BaseExpression, value: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` with its innermost name/buffer reference replaced by the expression that built it."""
    node = strip_parens(node)
    if isinstance(node, cst.Subscript):
        return node.with_changes(value=_replace_base(node.value, value))
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _PASS_THROUGH:
        return node.with_changes(func=node.func.with_changes(value=_replace_base(node.func.value, value)))
    return value


def _buffers(cls: cst.ClassDef) -> dict[str, cst.BaseExpression]:
    """``name -> expression`` for ``self.register_buffer("name", expr)`` and ``self.name = expr`` in a class."""
    found: dict[str, cst.BaseExpression] = {}

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if dotted(node.func) == "self.register_buffer" and len(node.args) >= 2:
                key = node.args[0].value
                if isinstance(key, cst.SimpleString) and isinstance(name := key.evaluated_value, str):
                    found[name] = node.args[1].value

        def visit_Assign(self, node: cst.Assign) -> None:
            target = dotted(node.targets[0].target) if len(node.targets) == 1 else None
            if target and target.startswith("self.") and target.count(".") == 1:
                found[target[5:]] = node.value

    cls.visit(_Find())
    return found


@dataclass
class _Attention:
    """One recognised attention computation inside a block's statement list."""

    window: list[int]
    """Indices of the statements it replaces; the replacement goes at the last one."""
    removed_mask: int | None
    """Index of a local mask assignment it read (removed when nothing else reads it)."""
    replacement: cst.SimpleStatementLine
    temps: set[str]
    """Names of the intermediate tensors (scores, weights), which must not be read later."""

    @property
    def end(self) -> int:
        return self.window[-1]


def _match(stmts: Sequence[cst.BaseStatement], i: int, masks: _Masks, sdpa: str) -> _Attention | None:
    first = single_assign(stmts[i])
    if first is None:
        return None
    a, value = first
    scored, scale, divide = _split_scale(value)
    pair = _scores(scored)
    if pair is None:
        return None
    q, k = pair
    j = i + 1
    temps = {a}
    # an optional separate scaling step: att = att * s / att = att / d / att *= s
    if scale is None and j < len(stmts):
        step = single_assign(stmts[j])
        if step is not None and isinstance(step[1], cst.BinaryOperation) and dotted(step[1].left) == a:
            op = step[1].operator
            if isinstance(op, (cst.Multiply, cst.Divide)):
                scale, divide, a = step[1].right, isinstance(op, cst.Divide), step[0]
                temps.add(a)
                j += 1
        elif isinstance(line := stmts[j], cst.SimpleStatementLine) and len(line.body) == 1:
            aug = line.body[0]
            if isinstance(aug, cst.AugAssign) and dotted(aug.target) == a and isinstance(aug.operator, (cst.MultiplyAssign, cst.DivideAssign)):
                scale, divide = aug.value, isinstance(aug.operator, cst.DivideAssign)
                j += 1
    # an optional local mask defined between the scores and the fill
    masks.used_local = None
    if j < len(stmts):
        local = single_assign(stmts[j])
        if local is not None and local[0] != a and _tensor_shape(local[1]) is not None:
            masks.local[local[0]] = (j, local[1])
            j += 1
    if j >= len(stmts):
        return None
    # the fill (and maybe the softmax, in one statement)
    fill = single_assign(stmts[j])
    if fill is None:
        return None
    filled, fill_value = fill
    softmax_done = False
    if isinstance(fill_value, cst.Call) and dotted(fill_value.func) in _SOFTMAX:
        inner = arg(fill_value, 0, "input")
        if not (isinstance(inner, cst.Call) and int_value(arg(fill_value, 1, "dim")) == -1 and len(fill_value.args) == 2):
            return None
        fill_value, softmax_done = inner, True
    if not (isinstance(fill_value, cst.Call) and isinstance(fill_value.func, cst.Attribute)
            and fill_value.func.attr.value == "masked_fill" and dotted(fill_value.func.value) == a and len(fill_value.args) == 2):
        return None
    if code(fill_value.args[1].value).replace(" ", "") not in {v.replace(" ", "") for v in _NEG_INF}:
        return None
    if not masks.causal(fill_value.args[0].value):
        return None
    a = filled
    temps.add(a)
    j += 1
    if not softmax_done:
        soft = single_assign(stmts[j]) if j < len(stmts) else None
        if soft is None or not _is_softmax(soft[1], a):
            return None
        a = soft[0]
        temps.add(a)
        j += 1
    # optional dropout on the weights
    dropout_p = None
    drop = single_assign(stmts[j]) if j < len(stmts) else None
    if drop is not None and isinstance(drop[1], cst.Call):
        call, name = drop[1], dotted(drop[1].func) or ""
        src = arg(call, 0, "input")
        if dotted(src) == a and name.startswith("self.") and "drop" in name.lower() and len(call.args) == 1:
            dropout_p = cst.parse_expression(f"{name}.p if self.training else 0.0")
        elif dotted(src) == a and name in ("F.dropout", "torch.nn.functional.dropout", "nn.functional.dropout"):
            p = arg(call, 1, "p")
            training = arg(call, 2, "training")
            if p is None:
                return None
            dropout_p = cst.parse_expression(f"{code(p)} if {code(training)} else 0.0") if training is not None else p
        if dropout_p is not None:
            a = drop[0]
            temps.add(a)
            j += 1
    # the weighted sum; statements that touch neither the weights nor q and k may come first
    # (``v = self.value(x)`` in the tutorial spelling)
    window = [k for k in range(i, j) if k != masks.used_local]
    avoid = temps | names_in(q) | names_in(k)
    while j < len(stmts):
        out = single_assign(stmts[j])
        v = _weighted_sum(out[1], a) if out is not None else None
        if out is not None and v is not None:
            break
        if not isinstance(stmts[j], cst.SimpleStatementLine) or names_in(stmts[j]) & avoid:
            return None
        j += 1
    else:
        return None
    y = out[0]
    window.append(j)
    temps.discard(y)
    args = [cst.Arg(strip_parens(q)), cst.Arg(strip_parens(k)), cst.Arg(strip_parens(v))]
    if dropout_p is not None:
        args.append(_kw("dropout_p", dropout_p))
    args.append(_kw("is_causal", cst.Name("True")))
    scale_value = _scale_arg(scale, divide, code(q), code(k))
    if scale_value is not None:
        args.append(_kw("scale", scale_value))
    call = cst.Call(func=cst.parse_expression(sdpa), args=args)
    # Lines single_assign read: simple statements both.
    replacement = cst.ensure_type(stmts[i], cst.SimpleStatementLine).with_changes(
        body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(y))], value=call)],
        trailing_whitespace=cst.TrailingWhitespace(
            newline=cst.ensure_type(stmts[j], cst.SimpleStatementLine).trailing_whitespace.newline),
    )
    return _Attention(window, masks.used_local, replacement, temps)


def _weighted_sum(value: cst.BaseExpression, weights: str) -> cst.BaseExpression | None:
    """``v`` from ``weights @ v``, ``torch.matmul(weights, v)`` or the einsum spelling."""
    if _is_einsum(value):
        ok = _av_einsum(value) and dotted(value.args[1].value) == weights
        return value.args[2].value if ok else None
    pair = _product(value)
    return pair[1] if pair is not None and dotted(pair[0]) == weights else None


def _kw(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(value=value, keyword=cst.Name(name), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))


class SdpaCodemod(PatchCodemod):
    DESCRIPTION = "Replace hand-written causal attention with F.scaled_dot_product_attention(is_causal=True)."

    def __init__(self, context: CodemodContext) -> None:
        super().__init__(context)
        self.classes: list[cst.ClassDef] = []
        self.functions: list[cst.FunctionDef] = []
        self.sdpa = "torch.nn.functional.scaled_dot_product_attention"
        # per class and function, not per block: recomputing them for every block of a big class
        # made the pass quadratic in the class's size
        self.buffers: dict[int, dict[str, cst.BaseExpression]] = {}
        self.has_sdpa: dict[int, bool] = {}

    def visit_Module(self, node: cst.Module) -> None:
        self.sdpa = functional_prefix(node) + ".scaled_dot_product_attention"

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self.classes.pop()
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self.functions.pop()
        return updated_node

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
                            ) -> cst.IndentedBlock:
        if not self.functions:
            return updated_node
        function = self.functions[-1]
        if id(function) not in self.has_sdpa:
            self.has_sdpa[id(function)] = "scaled_dot_product_attention" in code(function)
        if self.has_sdpa[id(function)]:
            return updated_node
        buffers: dict[str, cst.BaseExpression] = {}
        if self.classes:
            cls = self.classes[-1]
            if id(cls) not in self.buffers:
                self.buffers[id(cls)] = _buffers(cls)
            buffers = self.buffers[id(cls)]
        stmts = list(original_node.body)
        drop: set[int] = set()
        replace: dict[int, cst.SimpleStatementLine] = {}
        local: dict[str, tuple[int, cst.BaseExpression]] = {}
        i = 0
        while i < len(stmts):
            match = _match(stmts, i, _Masks(buffers, local), self.sdpa)
            if match is not None and self._temps_dead(match, stmts):
                self.mark(
                    stmts[i],
                    "hand-written causal attention: use F.scaled_dot_product_attention(is_causal=True)",
                    end=stmts[match.end],
                )
                # comments written above any replaced line stay, above the replacement
                comments = [line for k in match.window[1:] for line in leading_lines(stmts[k]) if line.comment]
                replace[match.end] = match.replacement.with_changes(leading_lines=[*leading_lines(stmts[i]), *comments])
                drop.update(match.window[:-1])
                if match.removed_mask is not None and self._only_use(stmts, match, match.removed_mask):
                    drop.add(match.removed_mask)
                i = match.end + 1
                continue
            assigned = single_assign(stmts[i])
            if assigned is not None:
                local[assigned[0]] = (i, assigned[1])
            i += 1
        if not replace:
            return updated_node
        body = [replace.get(k, stmt) for k, stmt in enumerate(updated_node.body) if k not in drop]
        return updated_node.with_changes(body=body)

    def _temps_dead(self, match: _Attention, stmts: Sequence[cst.BaseStatement]) -> bool:
        """The attention weights must not be read after the replaced statements (returned, logged…)."""
        end_line = self.position(stmts[match.end]).end.line
        late: list[cst.Name] = []

        class _Reads(cst.CSTVisitor):
            def visit_Name(inner, node: cst.Name) -> None:
                if node.value in match.temps and self.position(node).start.line > end_line:
                    late.append(node)

        self.functions[-1].body.visit(_Reads())
        return not late

    def _only_use(self, stmts: Sequence[cst.BaseStatement], match: _Attention, mask: int) -> bool:
        """A local mask (assigned at ``mask``) can go when nothing but the replaced statements reads it."""
        assigned = single_assign(stmts[mask])
        if assigned is None:  # never: the mask was recorded from this assignment
            return False
        name = assigned[0]
        keep = set(match.window) | {mask}
        return all(name not in names_in(s) for k, s in enumerate(stmts) if k not in keep)


class SdpaAttention(Patch):
    name = "sdpa_attention"
    DESCRIPTION = SdpaCodemod.DESCRIPTION
    numerics_by_design = False
    prior = ATTENTION.beliefs("sdpa")
    needles = ("softmax",)
    requires = (("masked_fill",),)
    codemod = SdpaCodemod
