"""Which attention a job runs, read from its sources: a fused kernel keeps no scores."""

from __future__ import annotations

from pathlib import Path

from infrarsi.knobs.attention import EAGER, FUSED, attention_kind

EAGER_SRC = """
import torch
def attend(q, k, v):
    att = (q @ k.transpose(-2, -1)) * 0.125
    return torch.softmax(att, dim=-1) @ v
"""
FUSED_SRC = """
import torch.nn.functional as F
def attend(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
"""


def _repo(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text)
    return tmp_path


def test_a_call_to_a_fused_kernel_is_fused_whatever_else_the_repo_holds(tmp_path):
    assert attention_kind(_repo(tmp_path, model=FUSED_SRC, old=EAGER_SRC)) == FUSED


def test_a_softmax_beside_a_matrix_product_is_eager(tmp_path):
    assert attention_kind(_repo(tmp_path, model=EAGER_SRC)) == EAGER


def test_a_repo_whose_attention_lives_in_a_library_is_unknown_and_a_broken_file_is_skipped(tmp_path):
    repo = _repo(tmp_path, train="from transformers import AutoModel\nmodel = AutoModel.from_pretrained('x')\n",
                 broken="def (:\n")
    assert attention_kind(repo) == ""


def test_the_fixtures_are_read_as_their_code_runs():
    fixtures = Path(__file__).parents[2] / "fixtures"
    assert attention_kind(fixtures / "dense_gpt") == EAGER
