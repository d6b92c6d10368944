"""Python-loop MoE dispatch -> one sort by expert, one gather, one scatter.

Recognised: a loop over the experts of a ModuleList that finds each expert's (token, slot) pairs
and accumulates its weighted output into a buffer:

    for e, expert in enumerate(self.experts):          # or: for e in range(...): ... self.experts[e]
        tok, slot = torch.where(top_idx == e)          # or (top_idx == e).nonzero(as_tuple=True)
        [if tok.numel() == 0: continue]
        out[tok] += top_w[tok, slot, None] * expert(x[tok])     # or out.index_add_(0, tok, ...)

Rewritten to sort the flattened (token, slot) assignments by expert (stable, so each expert sees
its tokens in the same order as the loop did), gather the tokens once, run each expert on its
contiguous slice, and add the weighted outputs back with one ``index_add_``, in expert order as
the loop did. The same expert weights meet the same tokens with the same routing weights, so the
forward pass matches the loop bit for bit on CPU and gradients to float rounding.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
from libcst.codemod import CodemodContext

from infrarsi.patches._cst import arg, code, dotted, int_value, names_in, single_assign, strip_parens
from infrarsi.patches.base import Patch, PatchCodemod
from infrarsi.priors.builtin import MOE_DISPATCH

_TEMPS = ("expert_ids", "sort_order", "token_ids", "tokens_per_expert", "expert_out")


def _selection(stmt: cst.BaseStatement, index: str) -> tuple[str, str, cst.BaseExpression] | None:
    """``(tok, slot, top_idx)`` from ``tok, slot = torch.where(top_idx == index)`` and its spellings."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return None
    assign = stmt.body[0]
    target = assign.targets[0].target if len(assign.targets) == 1 else None
    if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
        return None
    names = [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
    if len(names) != len(target.elements):
        return None
    value = assign.value
    if isinstance(value, cst.Call) and dotted(value.func) == "torch.where" and len(value.args) == 1:
        cond = value.args[0].value
    elif isinstance(value, cst.Call) and dotted(value.func) == "torch.nonzero" and code(arg(value, None, "as_tuple") or cst.Name("False")) == "True":
        cond = value.args[0].value
    elif (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "nonzero"
          and code(arg(value, None, "as_tuple") or cst.Name("False")) == "True"):
        cond = value.func.value
    else:
        return None
    cond = strip_parens(cond)
    if not (isinstance(cond, cst.Comparison) and len(cond.comparisons) == 1 and isinstance(cond.comparisons[0].operator, cst.Equal)):
        return None
    if dotted(cond.comparisons[0].comparator) != index:
        return None
    return names[0], names[1], cond.left


def _is_skip(stmt: cst.BaseStatement) -> bool:
    """``if <anything>: continue``: the loop's guard for experts without tokens."""
    return (
        isinstance(stmt, cst.If)
        and stmt.orelse is None
        and isinstance(stmt.body, (cst.IndentedBlock, cst.SimpleStatementSuite))
        and len(stmt.body.body) == 1
        and _only_continue(stmt.body.body[0])
    )


def _only_continue(stmt: cst.CSTNode) -> bool:
    if isinstance(stmt, cst.Continue):
        return True
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Continue)


def _weight(node: cst.BaseExpression, tok: str, slot: str) -> cst.BaseExpression | None:
    """``top_w`` from ``top_w[tok, slot, None]`` / ``top_w[tok, slot].unsqueeze(-1)`` / ``top_w[tok, slot][:, None]``."""
    node = strip_parens(node)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "unsqueeze":
        if len(node.args) == 1 and int_value(node.args[0].value) in (-1, 1):
            return _indexed(node.func.value, tok, slot, 2)
        return None
    if isinstance(node, cst.Subscript) and [code(e.slice) for e in node.slice] == [":", "None"]:
        return _indexed(node.value, tok, slot, 2)
    return _indexed(node, tok, slot, 3)


def _indexed(node: cst.BaseExpression, tok: str, slot: str, width: int) -> cst.BaseExpression | None:
    node = strip_parens(node)
    if not isinstance(node, cst.Subscript) or len(node.slice) != width:
        return None
    parts = [code(e.slice) for e in node.slice]
    if parts[:2] != [tok, slot] or (width == 3 and parts[2] != "None"):
        return None
    return node.value


def _expert_call(node: cst.BaseExpression, tok: str, expert: str | None, experts: str | None, index: str
                 ) -> tuple[cst.BaseExpression, str] | None:
    """``(x, experts_attr)`` from ``expert(x[tok])`` or ``self.experts[index](x[tok])``."""
    node = strip_parens(node)
    if not (isinstance(node, cst.Call) and len(node.args) == 1):
        return None
    func = node.func
    if expert is not None and dotted(func) == expert:
        attr = experts
    elif isinstance(func, cst.Subscript) and len(func.slice) == 1 and code(func.slice[0].slice) == index:
        attr = dotted(func.value)
    else:
        return None
    x = strip_parens(node.args[0].value)
    if not (isinstance(x, cst.Subscript) and len(x.slice) == 1 and code(x.slice[0].slice) == tok):
        return None
    return (x.value, attr) if attr and attr.startswith("self.") else None


def _accumulate(stmts: Sequence[cst.BaseStatement], tok: str, slot: str, expert: str | None, experts: str | None,
                index: str) -> tuple[cst.BaseExpression, cst.BaseExpression, cst.BaseExpression, str] | None:
    """``(out, top_w, x, experts_attr)`` from the accumulation line, or None.

    The weighted output may be named first: ``y = expert(x[tok]) * top_w[tok, slot, None]``
    followed by ``out.index_add_(0, tok, y)``.
    """
    named = None
    if len(stmts) == 2:
        named = single_assign(stmts[0])
        if named is None:
            return None
    elif len(stmts) != 1:
        return None
    stmt = stmts[-1]
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        return None
    small = stmt.body[0]
    if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
        target = small.target
        if not (isinstance(target, cst.Subscript) and len(target.slice) == 1 and code(target.slice[0].slice) == tok):
            return None
        out, contribution = target.value, small.value
    elif isinstance(small, cst.Expr) and isinstance(call := small.value, cst.Call) \
            and isinstance(func := call.func, cst.Attribute) and func.attr.value == "index_add_" and len(call.args) == 3:
        if int_value(call.args[0].value) != 0 or dotted(call.args[1].value) != tok:
            return None
        out, contribution = func.value, call.args[2].value
    else:
        return None
    if named is not None:
        if dotted(contribution) != named[0]:
            return None
        contribution = named[1]
    contribution = strip_parens(contribution)
    if not (isinstance(contribution, cst.BinaryOperation) and isinstance(contribution.operator, cst.Multiply)):
        return None
    for w_side, e_side in ((contribution.left, contribution.right), (contribution.right, contribution.left)):
        weight = _weight(w_side, tok, slot)
        called = _expert_call(e_side, tok, expert, experts, index)
        if weight is not None and called is not None:
            return out, weight, called[0], called[1]
    return None


def _loop_head(node: cst.For) -> tuple[str, str | None, str | None] | None:
    """``(index, expert_var, experts_attr)`` for ``enumerate(self.experts)`` or ``range(...)`` loops."""
    it = node.iter
    if not isinstance(it, cst.Call):
        return None
    if dotted(it.func) == "enumerate" and len(it.args) == 1 and isinstance(node.target, cst.Tuple):
        elements = node.target.elements
        names = [e.value.value for e in elements if isinstance(e.value, cst.Name)]
        experts = dotted(it.args[0].value)
        if len(elements) == 2 and len(names) == 2 and experts and experts.startswith("self."):
            return names[0], names[1], experts
    if dotted(it.func) == "range" and len(it.args) == 1 and isinstance(node.target, cst.Name):
        return node.target.value, None, None
    return None


class MoeDispatchCodemod(PatchCodemod):
    DESCRIPTION = "Replace a Python loop over MoE experts with a sorted, batched dispatch."

    def __init__(self, context: CodemodContext) -> None:
        super().__init__(context)
        self.functions: list[cst.FunctionDef] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self.functions.pop()
        return updated_node

    def _read_after(self, loop: cst.For) -> set[str]:
        """Names read after the loop in the enclosing function (the loop's temporaries must not be)."""
        end = self.position(loop).end.line
        names: set[str] = set()
        outer = self

        class _Names(cst.CSTVisitor):
            def visit_Name(self, node: cst.Name) -> None:
                if outer.position(node).start.line > end:
                    names.add(node.value)

        self.functions[-1].body.visit(_Names())
        return names

    def leave_For(self, original_node: cst.For, updated_node: cst.For
                  ) -> cst.For | cst.FlattenSentinel[cst.BaseStatement]:
        head = _loop_head(original_node)
        if head is None or not self.functions or original_node.orelse is not None:
            return updated_node
        if not isinstance(original_node.body, cst.IndentedBlock):  # one line: no selection statement to read
            return updated_node
        index, expert, experts = head
        body = list(original_node.body.body)
        if not body:
            return updated_node
        selected = _selection(body[0], index)
        if selected is None:
            return updated_node
        tok, slot, top_idx = selected
        rest = body[1:]
        while rest and _is_skip(rest[0]):
            rest = rest[1:]
        found = _accumulate(rest, tok, slot, expert, experts, index)
        if found is None:
            return updated_node
        out, top_w, x, experts_attr = found
        # Two statements: _accumulate found the first to name the weighted output.
        if len(rest) == 2 and (named := single_assign(rest[0])) is not None and named[0] in self._read_after(original_node):
            return updated_node
        if expert is None and not experts_attr:
            return updated_node
        taken = names_in(self.functions[-1])
        names = {t: _free(t, taken) for t in _TEMPS}
        self.mark(original_node, f"Python loop over {experts_attr} experts: dispatch all tokens at once, sorted by expert")
        lines = [
            f"{names['expert_ids']} = {code(top_idx)}.flatten()",
            f"{names['sort_order']} = {names['expert_ids']}.argsort(stable=True)",
            f"{names['token_ids']} = {names['sort_order']} // {code(top_idx)}.size(-1)",
            f"{names['tokens_per_expert']} = {names['expert_ids']}.bincount(minlength=len({experts_attr})).tolist()",
            f"{names['expert_out']} = torch.cat([expert(chunk) for expert, chunk in zip({experts_attr}, "
            f"{code(x)}[{names['token_ids']}].split({names['tokens_per_expert']}))])",
            f"{code(out)}.index_add_(0, {names['token_ids']}, {names['expert_out']} * "
            f"{code(top_w)}.flatten()[{names['sort_order']}, None])",
        ]
        stmts = [cst.parse_statement(line + "\n") for line in lines]
        comment = cst.EmptyLine(
            comment=cst.Comment("# batched dispatch: sort (token, slot) pairs by expert, gather once, scatter once")
        )
        stmts[0] = stmts[0].with_changes(leading_lines=[*original_node.leading_lines, comment])
        self.add_needed_import("torch")
        return cst.FlattenSentinel(stmts)


def _free(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name


class MoeBatchedDispatch(Patch):
    name = "moe_batched_dispatch"
    DESCRIPTION = MoeDispatchCodemod.DESCRIPTION
    numerics_by_design = False
    prior = MOE_DISPATCH.beliefs("batched")
    needles = ("for ",)
    requires = (("where(", "nonzero("),)
    codemod = MoeDispatchCodemod
