"""One training-loop finder (infrarsi/knobs/loop.py): the probe codemod, init's loop reach and the
data flow agree on where a script trains. Static, no trial."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from infrarsi.codemods.insert_probe import insert_probe
from infrarsi.knobs.dataflow import build_graph
from infrarsi.knobs.loop import find_loop, is_backward, loop_role, loops, mentions_backward, training_loop
from infrarsi.knobs.source import ParsedFile, walk

MODULE_LOOP = """
for it in range(steps):
    x, y = get_batch()
    loss = model(x, y)
    loss.backward()
    optimizer.step()
"""

MAIN_GUARD = """
def train(loader):
    for x in loader:
        loss = model(x)
        loss.backward()
        opt.step()


def main():
    train(make_loader())


if __name__ == "__main__":
    main()
"""

WHILE = """
step = 0
while step < max_steps:
    x = next(batches)
    loss = net(x)
    loss.backward()
    optimizer.step()
    step += 1
"""

INNER_TRAINS = """
def main():
    for epoch in range(epochs):
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        evaluate()


if __name__ == "__main__":
    main()
"""

ACCUMULATES = """
def train():
    while True:
        for micro in range(accum):
            X = get_batch()
            loss = model(X) / accum
            scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


train()
"""


def _wrap(source: str) -> MetadataWrapper:
    return MetadataWrapper(cst.parse_module(textwrap.dedent(source).lstrip()))


def _lines(wrapper: MetadataWrapper, node: cst.CSTNode) -> tuple[int, int]:
    where = wrapper.resolve(PositionProvider)[node]
    return where.start.line, where.end.line


@pytest.mark.parametrize(("source", "span", "kind", "accumulates"), [
    (MODULE_LOOP, (1, 5), "module_loop", False),
    (MAIN_GUARD, (2, 5), "main_guard", False),
    (WHILE, (2, 7), "module_loop", False),
    (INNER_TRAINS, (3, 6), "main_guard", False),
    (ACCUMULATES, (2, 8), "function_from_module", True),
])
def test_the_probe_the_reach_and_the_data_flow_see_one_loop(source, span, kind, accumulates):
    wrapper = _wrap(source)
    found = training_loop(wrapper.module)
    assert found is not None and _lines(wrapper, found.node) == span
    assert found.accumulates is accumulates

    # The probe lands in that loop: found again in the edited script, it holds the probe's call.
    edit = insert_probe(wrapper.module.code)
    assert edit.status == "inserted", edit.reason
    edited = training_loop(cst.parse_module(edit.code))
    assert edited is not None and "probe.step(" in cst.Module([]).code_for_node(edited.node)

    # Running the script reaches that loop's backward.
    reach = find_loop(("train.py", wrapper))
    assert (reach.kind, reach.where) == (kind, f"train.py:{_lines(wrapper, found.backward)[0]}")

    # The data flow's accumulation is the finder's: a micro-step loop around the backward.
    micro = [lp for lp in loops(found.node) if isinstance(lp, cst.For) and lp is not found.node
             and loop_role(lp, nested=True) == "micro_steps"]
    assert bool(micro) is accumulates
    assert build_graph([ParsedFile("train.py", wrapper)]).has_accumulation is accumulates


DEEPSPEED = """
for epoch in range(epochs):
    for _ in range(n):
        loss = engine(batch)
        engine.backward(loss)
        engine.step()
"""

BARE_BACKWARD = """
for epoch in range(epochs):
    for _ in range(k):
        loss = model(x)
        backward(loss)
    optimizer.step()
"""


def test_where_the_readings_differ_each_caller_keeps_its_own():
    """The probe needs an optimizer's step and a ``.backward()`` call; the data flow reads calls by
    name, so a DeepSpeed engine's step ends a step and a bare ``backward(loss)`` trains there."""
    deepspeed = _wrap(DEEPSPEED)
    inner = loops(deepspeed.module)[1]
    assert training_loop(deepspeed.module) is None
    assert find_loop(("train.py", deepspeed)).kind == "module_loop"
    assert loop_role(inner, nested=True) == "steps"

    bare = _wrap(BARE_BACKWARD)
    assert training_loop(bare.module) is None
    assert not any(is_backward(n) for n in walk(bare.module))
    assert loop_role(loops(bare.module)[1], nested=True) == "micro_steps"


def test_the_data_flow_reads_a_mention_of_backward_in_the_text():
    """A comment counts (a loader's loop reads as training), a space before the parenthesis does not."""
    commented = cst.parse_module("for x in val_loader:\n    # no loss.backward() here\n    model(x)\n")
    spaced = cst.parse_module("for x in loader:\n    loss.backward ()\n")
    assert mentions_backward(commented) and not any(is_backward(n) for n in walk(commented))
    assert not mentions_backward(spaced) and any(is_backward(n) for n in walk(spaced))
