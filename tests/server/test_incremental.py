"""An edited document's analysis reuses its unchanged units and still equals a cold analysis.

The diagnostics are a function of the ``Analysis`` (sites, knobs, loop, problem) and the repo's
state, so an incremental ``Analysis`` equal to a cold one gives the same diagnostics.
"""

from __future__ import annotations

from pathlib import Path

from pygls.workspace import PositionCodec

from bench.lsp_latency import training_file
from infrarsi_server import worker
from infrarsi_server.analysis import Analyses, Analysis

ROOT = Path(__file__).resolve().parents[2]
PATH = Path("/nonexistent/train.py")
"""Never read: the analysis works on the text it is given."""
LOOP_IN_A_FUNCTION = ROOT / "tests" / "test_data" / "patches" / "gradient_accumulation" / "loop.before.py"


def _generated_file() -> str:
    """Copies of the dense GPT's model classes, its top-level training loop, then a ``train``
    function whose loop gradient accumulation applies to (a site inside a definition)."""
    train = LOOP_IN_A_FUNCTION.read_text().split("\n\n\n", 1)[1]
    return training_file(700) + "\n\n" + train


def _counting(analyses: Analyses) -> list[str]:
    """The text of every unit ``analyses`` sends to an analysis process from now on."""
    sent: list[str] = []
    call = analyses._isolated.call

    async def counted(owner, fn, *args):
        if fn is worker.analyse:
            sent.extend(text for text, _names, _find_loop in args[1])
        return await call(owner, fn, *args)

    analyses._isolated.call = counted
    return sent


async def _analyse(analyses: Analyses, text: str) -> Analysis:
    return await analyses.get(analyses.key(PATH, text, None), "train.py", text, None, PositionCodec())


async def test_each_edit_analysed_incrementally_equals_a_cold_analysis():
    text = _generated_file()
    edits = [
        ("# training loop", "# training loop, edited"),  # a comment at top level
        ("import math\n", "import math\n\nSEED = 0\n\n"),  # every definition moves down
        ("        optimizer.zero_grad()\n", ""),  # one function loses its site
        ("import inspect\n", ""),  # the imports every unit carries
    ]
    incremental = Analyses()
    first = await _analyse(incremental, text)
    assert {"sdpa_attention", "gradient_accumulation"} <= {p.name for p in first.patches}, "sites in definitions"
    assert first.loop is not None
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
        assert await _analyse(incremental, text) == await _analyse(Analyses(), text), (old, new)


async def test_a_comment_edit_reanalyses_at_most_the_unit_it_is_in():
    text = _generated_file()
    analyses = Analyses()
    sent = _counting(analyses)
    await _analyse(analyses, text)
    assert len(sent) > 10, "cold: every unit"

    # a comment line between top-level statements belongs to no unit: nothing is analysed again
    sent.clear()
    text = text.replace("# training loop", "# training loop, edited", 1)
    await _analyse(analyses, text)
    assert sent == []

    # one inside a function: that function's unit only
    text = text.replace("    model.train()\n", "    model.train()  # dropout on\n", 1)
    await _analyse(analyses, text)
    assert len(sent) == 1 and "# dropout on" in sent[0], [s[:60] for s in sent]
    assert sent[0].rstrip().endswith("print(batch_idx, loss.item())"), "the train function's unit"
