"""The micro-batch and its accumulation as one dimension, and the data flow that shows it.

When a script has both a micro-batch setting and an accumulation count, whatever their names and
wherever they are declared (flags, globals, config files, dataclass fields, nested config nodes),
the search moves them together so that micro-batch x accumulation (x the processes, unless the
script divides its count by them) stays the global batch (``infrarsi.search.space``). This module
says why init paired them, from the data flow (``infrarsi.knobs.dataflow``): where the micro-batch
is the data's leading dimension, where the count bounds the loop around ``backward()`` or divides
the loss, where the script divides it by its process count, and which of their uses only log (a
printed tokens-per-iteration, an MFU estimate), which lock neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from infrarsi import batch
from infrarsi.contract import Knob
from infrarsi.knobs.dataflow import FlowGraph, Reach

LINE_CHARS = 90
"""A quoted source line is cut to this many characters."""


@dataclass(slots=True)
class PairFlow:
    micro: str
    """The micro-batch knob."""
    accum: str
    """The accumulation knob."""
    ranks: str
    """torchrun's process count knob when the job runs under it; empty otherwise."""
    global_batch: int
    over_ranks: bool
    """The script divides the count by its process count: micro x accumulation is the global batch."""
    splits: list[tuple[int, int]] = field(default_factory=list)
    """(micro-batch, accumulation) pairs that keep the global batch at the default process count."""
    evidence: list[str] = field(default_factory=list)
    """The data flow, one line per place a member acts: ``knob: what, at file:line: `code```."""
    logged: list[str] = field(default_factory=list)
    """Where a member only reaches logging: ``file:line: `code```."""


def _quote(repo: Path, where: str) -> str:
    """``file:line`` followed by that line's code, cut to ``LINE_CHARS``."""
    rel, _, line = where.rpartition(":")
    try:
        text = (repo / rel).read_text(errors="replace").splitlines()[int(line) - 1].strip()
    except (OSError, ValueError, IndexError):
        return where
    if len(text) > LINE_CHARS:
        text = text[: LINE_CHARS - 1] + "…"
    return f"{where}: `{text}`"


def _first(reaches: list[Reach], kind: str, inverted: bool | None = None) -> list[str]:
    return list(dict.fromkeys(r.where for r in reaches if r.kind == kind
                              and (inverted is None or r.inverted == inverted)))


def pair_flow(repo: Path, graph: FlowGraph, knobs: list[Knob], sources: dict[str, list[str]],
              global_batch: int, divided_at: str, ranks: int = 1) -> PairFlow | None:
    """The pair init coupled, with its evidence; None when the contract has no tunable pair.
    ``sources``: each knob's flow sources (``dataflow.knob_sources``); ``divided_at``: where the
    script divides the count by its process count (``Role.over_ranks``); ``ranks``: the
    command's process count."""
    micro = next((k for k in knobs if k.role == "micro_batch" and k.tunable), None)
    accum = next((k for k in knobs if k.role == "grad_accum" and k.tunable and not k.patch), None)
    if micro is None or accum is None or not global_batch:
        return None
    nproc = next((k for k in knobs if k.role == "nproc_per_node"), None)
    over = bool(accum.over_ranks)
    splits = [(int(m), batch.accumulation(global_batch, int(m), ranks, over)) for m in micro.domain
              if batch.divides(global_batch, int(m), 1 if over else ranks)]
    splits = [(m, a) for m, a in splits if batch.keeps(global_batch, m, a, ranks, over) and a in accum.domain]
    flow = PairFlow(micro=micro.name, accum=accum.name, ranks=nproc.name if nproc else "",
                    global_batch=global_batch, over_ranks=over, splits=splits)
    micro_reach = graph.reach(sources[micro.name])
    accum_reach = graph.reach(sources[accum.name])
    for where in _first(micro_reach, "batch"):
        flow.evidence.append(f"{micro.name}: the data's leading dimension at {_quote(repo, where)}")
    for where in _first(micro_reach, "accumulation", inverted=True):
        flow.evidence.append(f"{micro.name}: the accumulation count divides by it at {_quote(repo, where)}")
    for where in _first(accum_reach, "accumulation", inverted=False):
        flow.evidence.append(f"{accum.name}: the accumulation count at {_quote(repo, where)}")
    if divided_at:
        flow.evidence.append(f"{accum.name}: divided by the process count at {_quote(repo, divided_at)}: "
                             "it counts every rank's micro-batches")
    members = graph.symbols(sources[micro.name]) | graph.symbols(sources[accum.name])
    for sink in graph.logged:
        if any(sym in members for sym, _, _ in sink.refs):
            flow.logged.append(_quote(repo, sink.where))
    flow.logged = list(dict.fromkeys(flow.logged))
    return flow


def describe(flow: PairFlow, seq_len: int = 0) -> list[str]:
    """The pair in words, for init's output: the dimension, its values, the data flow."""
    per = " x the processes" if flow.ranks and not flow.over_ranks else ""
    tokens = f" ({flow.global_batch * seq_len:,} tokens)" if seq_len else ""
    lines = [f"one dimension: {flow.micro} x {flow.accum}{per} = {flow.global_batch} sequences a step{tokens}, "
             "held by every split the search tries"]
    if flow.splits:
        lines.append("  splits: " + ", ".join(f"{m} x {a}" for m, a in flow.splits))
    lines += [f"  {line}" for line in flow.evidence]
    if flow.logged:
        lines.append(f"  only logged (locks neither): {'; '.join(flow.logged)}")
    return lines
