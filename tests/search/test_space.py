"""The search space: coupling keeps the global batch, encodings are baseline-relative sums."""

import math

import numpy as np
import pytest

from infrarsi.contract import Knob
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import contract_with


def _coupled_contract():
    return contract_with([
        Knob(name="micro", role="micro_batch", type="int", default=16, domain=[1, 2, 4, 8, 16], tunable=True),
        Knob(name="accum", role="grad_accum", type="int", default=1, domain=[1, 2, 4, 8, 16], tunable=True),
        Knob(name="nproc", role="nproc_per_node", type="int", default=1, domain=[1, 2], tunable=True),
        Knob(name="opt", role="optimizer_impl", type="str", default="a", domain=["a", "b", "c"], tunable=True),
    ], global_batch=16)


def test_coupled_knobs_keep_the_global_batch():
    space = SearchSpace.from_contract(_coupled_contract(), [])
    cands = space.all_candidates()
    for c in cands:
        assert c.knobs["micro"] * c.knobs["accum"] * c.knobs["nproc"] == 16
    # (micro, nproc) pairs with micro * nproc <= 16: 5 with one process, 4 with two; x 3 optimizers.
    assert len(cands) == space.size() == 9 * 3
    assert len({c.key() for c in cands}) == len(cands)


def test_persistent_workers_and_prefetch_need_worker_processes():
    """torch's DataLoader raises for persistent_workers or a prefetch factor with num_workers=0."""
    space = SearchSpace.from_contract(contract_with([
        Knob(name="workers", role="dataloader_workers", type="int", default=0, domain=[0, 2], tunable=True),
        Knob(name="persistent", role="dataloader_persistent", type="bool", default=False, domain=[False, True],
             tunable=True),
        Knob(name="prefetch", role="dataloader_prefetch", type="int", default=None, domain=[None, 4], tunable=True),
    ], global_batch=16), [])
    cands = space.all_candidates()
    assert all(c.knobs["workers"] > 0 for c in cands if c.knobs["persistent"] or c.knobs["prefetch"])
    # Without workers only the baseline's loader; with 2 workers all four.
    assert len(cands) == space.size() == 1 + 4
    base = space.baseline()
    assert space.with_value(base, "persistent", True) is None
    assert not any(n.knobs["prefetch"] for n in space.neighbours(base))
    assert all(space.is_valid(c) for c in space.sample(np.random.default_rng(0), 20))


def test_changing_the_micro_batch_moves_the_accumulation_with_it():
    space = SearchSpace.from_contract(_coupled_contract(), [])
    base = space.baseline()
    halved = space.with_value(base, "micro", 8)
    assert halved.knobs["accum"] == 2 and halved.knobs["nproc"] == 1
    micro_moves = [n for n in space.neighbours(base) if n.knobs["opt"] == "a"]
    assert all(n.knobs["micro"] * n.knobs["accum"] * n.knobs["nproc"] == 16 for n in micro_moves)
    assert all(space.is_valid(n) for n in space.neighbours(base))
    broken = space.with_value(base, "opt", "b").knobs | {"accum": 4}
    assert not space.is_valid(type(base)(knobs=broken))


def test_without_an_accumulation_knob_the_micro_batch_must_divide_the_global_batch():
    contract = contract_with([
        Knob(name="micro", role="micro_batch", type="int", default=4, domain=[1, 2, 3, 4, 32], tunable=True),
    ], global_batch=16)
    space = SearchSpace.from_contract(contract, [])
    assert sorted(c.knobs["micro"] for c in space.all_candidates()) == [1, 2, 4]


def test_encoding_is_relative_to_the_baseline(dense_space):
    base = dense_space.baseline()
    assert not dense_space.encode(base).any()
    assert dense_space.settings(base) == []
    cand = dense_space.with_value(base, "micro_batch_size", 16)
    cand = dense_space.with_value(cand, "dtype", "bfloat16")
    cand = type(cand)(knobs={**cand.knobs, "compile": True}, patches=("flash_mlp",))
    x = dict(zip([c.name for c in dense_space.columns], dense_space.encode(cand), strict=True))
    assert x["micro_batch_size"] == pytest.approx(math.log2(16) - math.log2(4))  # log2 for powers of two
    assert x["dtype=bfloat16"] == 1.0 and x["compile"] == 1.0 and x["patch:flash_mlp"] == 1.0
    assert x["optimizer_impl=fused"] == 0.0 and x["threads"] == 0.0
    assert sorted(dense_space.settings(cand)) == sorted(
        ["micro_batch_size=16", "dtype=bfloat16", "compile=True", "patch:flash_mlp"])


def test_encoding_is_the_sum_of_setting_deltas(dense_space):
    cands = dense_space.sample(np.random.default_rng(0), 50)
    direct = np.array([dense_space.encode(c) for c in cands])
    assert np.allclose(direct, dense_space.enumerated().features[[dense_space.enumerated().keys.index(c.key())
                                                                   for c in cands]])
    assert all(dense_space.is_valid(c) for c in cands)


def test_gated_patch_only_appears_with_its_gate():
    contract = contract_with([
        Knob(name="nproc", role="nproc_per_node", type="int", default=1, domain=[1, 2], tunable=True),
        Knob(name="ckpt", role="activation_checkpointing", type="bool", default=False, domain=[False, True],
             tunable=True),
    ])
    space = SearchSpace.from_contract(contract, ["ddp_bucket_view", "sdpa"], {"ddp_bucket_view": "nproc=2"})
    cands = space.all_candidates()
    assert all(c.knobs["nproc"] == 2 for c in cands if "ddp_bucket_view" in c.patches)
    assert len(cands) == space.size() == 2 * 2 + 2 * 4  # nproc=1: sdpa only; nproc=2: both
    single = space.with_value(next(c for c in cands if "ddp_bucket_view" in c.patches), "nproc", 1)
    assert "ddp_bucket_view" not in single.patches
