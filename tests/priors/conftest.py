"""A contract with one tunable knob per role the built-in table covers, and hardware of each kind."""

from __future__ import annotations

import pytest

from infrarsi.contract import Contract, Knob, LossInvariant, MemoryBudget, Scope, Workload
from infrarsi.patches import declared_priors
from infrarsi.priors import PriorContext
from infrarsi.records import HardwareFingerprint

PATCHES = ("sdpa_attention", "compile_model", "tf32_matmul")


def hardware(device: str, cores: int = 2) -> HardwareFingerprint:
    cuda = device == "cuda"
    return HardwareFingerprint(
        cpu_model="AMD EPYC 7571", cpu_isa="AVX2", cpu_cores=cores, cpu_physical_cores=cores, torch_threads=cores,
        ram_bytes=8 * 2**30, gpu_name="NVIDIA H100 80GB HBM3" if cuda else "", gpu_count=1 if cuda else 0,
        gpu_memory_bytes=80 * 2**30 if cuda else 0, torch_version="2.13.0", cuda_version="12.8" if cuda else "",
        python_version="3.11.9",
    )


def knob(name: str, role: str, type_: str, default, domain) -> Knob:
    return Knob(name=name, role=role, type=type_, default=default, flag=f"--{name}", domain=domain, tunable=True)


def make_contract(knobs: list[Knob] | None = None) -> Contract:
    return Contract(
        workload=Workload(entry="train.py", command=["python", "train.py"], tokens_per_step=16 * 128, seq_len=128,
                          global_batch=16, seed=1337, warmup_steps=2, measured_steps=8, planned_steps=1000),
        loss=LossInvariant(compare_steps=5, tolerance=1e-5, numerics_tolerance=1e-4),
        memory=MemoryBudget(budget_bytes=2**30),
        scope=Scope(editable=["model.py"]),
        knobs=knobs if knobs is not None else [
            knob("batch_size", "micro_batch", "int", 16, [1, 4, 16, 32]),
            knob("gradient_accumulation_steps", "grad_accum", "int", 1, [1, 4, 16]),
            knob("threads", "threads", "int", 2, [1, 2, 4]),
            knob("checkpointing", "activation_checkpointing", "bool", False, [False, True]),
            knob("compile", "compile", "bool", False, [False, True]),
            knob("dtype", "dtype", "str", "float32", ["float32", "bfloat16"]),
            knob("optimizer", "optimizer_impl", "str", "for_loop", ["for_loop", "foreach", "fused"]),
            Knob(name="seed", role="workload", type="int", default=1337, flag="--seed"),
        ],
    )


def _make_context(device: str = "cpu", **overrides) -> PriorContext:
    declared = declared_priors(device)
    fields = dict(contract=make_contract(), hardware=hardware(device), patches={p: declared[p] for p in PATCHES},
                  sources={"model.py": "import torch\n\nclass GPT(torch.nn.Module):\n    pass\n"})
    return PriorContext(**{**fields, **overrides})


@pytest.fixture
def make_context():
    """``make_context(device="cpu", **PriorContext fields)``."""
    return _make_context


@pytest.fixture
def contract_with():
    """``contract_with(knobs)``: the test contract with these knobs."""
    return make_contract


@pytest.fixture
def tunable():
    """``tunable(name, role, type, default, domain)``: a tunable knob."""
    return knob


@pytest.fixture(params=["cpu", "cuda"])
def device(request) -> str:
    return request.param
