"""A knob's role from where its value acts (``infrarsi.knobs.dataflow``), the catalog's name rules
only where the code says nothing.

- Anything that reaches the model's shape, the data, the loss, the optimizer's hyper-parameters,
  the seed or the step count is ``workload`` (locked), whatever its name says.
- A value at the leading dimension of the data (``DataLoader(batch_size=…)``, ``x.view(B, T)``,
  ``torch.randint(n, (B,))``) is a micro-batch only when accumulation holds the global batch: it
  divides the accumulation count (``total // (B * T)``) or another knob is the accumulation count.
  Without accumulation it is the global batch: ``workload``. A batch size only an evaluation loader
  uses (no ``backward()`` behind it) is ``eval_batch``.
- A value that bounds the loop around ``backward()`` or divides the loss is ``grad_accum``; one
  that reaches that count through a numerator (``gbs // mbs``) is the global batch.
- Speed switches: the role of the operation it feeds or guards (``torch.set_num_threads``,
  ``DataLoader(num_workers=…)``, ``if x: torch.compile``, ``autocast(dtype=…)``, ``fused=``…).
- A value that only decides how often to print is ``logging``.

When in doubt, locked: a knob whose value reaches both a speed switch and the workload is
``workload``; names never make a knob the code shows to be workload tunable.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from infrarsi.knobs.catalog import Rule, classify
from infrarsi.knobs.dataflow import WORLD_SIZE, FlowGraph, Reach, build_graph, knob_sources
from infrarsi.knobs.raw import RawKnob
from infrarsi.knobs.source import ParsedFile


@dataclass(frozen=True, slots=True)
class Role:
    rule: Rule
    why: str
    """What decided it: the sink (``file:line``) or ``name`` (the catalog)."""
    constants: tuple = ()
    """Constants a guard compares the value with (extra values to try for an int switch)."""
    over_ranks: str = ""
    """For ``grad_accum``: where the script divides the count by its process count (``file:line``),
    so that it counts the micro-batches of every rank; empty: the count is each rank's."""


def _aspect(catalog: Rule, knob: RawKnob, fallback: str) -> str:
    if fallback in ("global_batch",) and ("token" in knob.help.lower() or catalog.aspect == "global_tokens"):
        return "global_tokens"
    if catalog.role == "workload" and catalog.aspect and fallback not in ("global_batch", "global_tokens"):
        return catalog.aspect
    return fallback


def _from_flow(knob: RawKnob, reaches: list[Reach], counts_accum: bool, has_accum: bool,
               catalog: Rule) -> Role | None:
    if knob.type not in ("int", "float"):
        # A count divides the loss; a string or a switch that only picks a divisor (``/ (16 if
        # reduction == "sum" else 1)``) is no accumulation count.
        reaches = [r for r in reaches if r.kind != "accumulation"]
    if not reaches:
        return None
    workload = [r for r in reaches if r.kind.startswith("workload:")]
    batch = [r for r in reaches if r.kind == "batch"]
    accum = [r for r in reaches if r.kind == "accumulation"]
    if workload and not batch and not accum:
        first = workload[0]
        aspect = first.kind.split(":", 1)[1]
        if catalog.role == "steps" and all(r.kind == "workload:steps" for r in workload):
            return Role(catalog, f"bounds the training loop at {first.where}")
        return Role(Rule("workload", "", _aspect(catalog, knob, aspect)), f"reaches the {aspect} at {first.where}")
    if batch or accum:
        divides = [r for r in accum if r.inverted]
        scales = [r for r in accum if r.scaled and not r.inverted]
        direct = [r for r in accum if not r.scaled and not r.inverted]
        if workload:
            first = workload[0]
            return Role(Rule("workload", "", _aspect(catalog, knob, first.kind.split(":", 1)[1])),
                        f"reaches the {first.kind.split(':', 1)[1]} at {first.where}")
        if divides and batch:
            return Role(Rule("micro_batch", ""), f"the data's leading dimension at {batch[0].where}; the "
                                                 f"accumulation count at {divides[0].where} divides by it")
        if scales and not batch:
            return Role(Rule("workload", "", _aspect(catalog, knob, "global_batch")),
                        f"the accumulation count at {scales[0].where} grows with it: the global batch")
        if direct and not batch:
            return Role(Rule("grad_accum", ""), f"accumulation at {direct[0].where}")
        if batch and has_accum and counts_accum and not workload:
            return Role(Rule("micro_batch", ""), f"the data's leading dimension at {batch[0].where}; another "
                                                 "knob counts the accumulation steps")
        where = (batch or accum)[0].where
        return Role(Rule("workload", "", _aspect(catalog, knob, "global_batch")),
                    f"the data's leading dimension at {where} with nothing accumulating: the global batch")
    evals = [r for r in reaches if r.kind == "eval_batch"]
    tunable = [r for r in reaches if r.kind not in ("logging", "eval_batch")]
    if tunable:
        role, _ = Counter(r.kind for r in tunable).most_common(1)[0]
        first = next(r for r in tunable if r.kind == role)
        constants = tuple(dict.fromkeys(c for r in tunable for c in r.constants))
        return Role(Rule(role, ""), f"acts through {role} at {first.where}", constants)
    if evals:
        return Role(Rule("eval_batch", ""), f"the batch of an evaluation loader only, at {evals[0].where}")
    logging = [r for r in reaches if r.kind == "logging"]
    if logging:
        return Role(Rule("logging", ""), f"only decides when to log, at {logging[0].where}")
    return None


def assign_roles(files: list[ParsedFile], knobs: list[RawKnob], style: str,
                 graph: FlowGraph | None = None, known: dict[str, Role] | None = None) -> dict[str, Role]:
    """Each knob's role: ``known`` for the settings whose place gives it (a framework schema's,
    ``infrarsi/knobs/frameworks.py``; a setting written in code, ``infrarsi/knobs/literals.py``),
    else from the data flow where the code shows where it acts, else the catalog."""
    known = known or {}
    graph = graph if graph is not None else build_graph(files)
    entry = files[0].rel if files else ""
    names = [k.name for k in knobs]
    reaches = {k.name: graph.reach(knob_sources(k.name, style, entry, k.receiver)) for k in knobs}
    counts_accum = {k.name for k, r in ((k, reaches[k.name]) for k in knobs)
                    if any(x.kind == "accumulation" and not x.scaled and not x.inverted for x in r)
                    and not any(x.kind == "batch" for x in r)}
    out = {}
    for k in knobs:
        if k.name in known:
            out[k.name] = known[k.name]
            continue
        catalog = classify(k, names)
        flow = _from_flow(k, reaches[k.name], bool(counts_accum - {k.name}), graph.has_accumulation, catalog)
        if flow is None:
            out[k.name] = Role(catalog, "name")
        elif catalog.role == "steps" and flow.rule.role == "workload":
            out[k.name] = Role(catalog, flow.why)
        elif catalog.role == "workload" and flow.rule.role not in ("workload", "micro_batch", "grad_accum"):
            # The name says workload and the code shows a speed switch too: in doubt, locked.
            out[k.name] = Role(catalog, f"name; also {flow.why}")
        else:
            out[k.name] = flow
        if out[k.name].rule.role == "grad_accum":
            where = _divided_by_world_size(graph, knob_sources(k.name, style, entry, k.receiver))
            if where:
                role = out[k.name]
                out[k.name] = Role(role.rule, role.why, role.constants, where)
    return out


def _divided_by_world_size(graph: FlowGraph, sources: list[str]) -> str:
    """Where the process count divides this accumulation count (``gradient_accumulation_steps //=
    ddp_world_size``, ``accum = args.accum // world_size``): ``file:line``; empty when it does not."""
    counted, world = graph.symbols(sources), graph.symbols([WORLD_SIZE])
    return next((where for where, numerator, divisor in graph.divisions
                 if numerator & counted and divisor & world), "")
