"""The rewritten attention and MoE compute the same function: outputs and gradients, not just text.

Each example module defines ``build() -> (module, input)``. The original and the patched source
are executed as real modules, built from the same seed, and run forward and backward on the same
input.
"""

import types
from pathlib import Path

import pytest
import torch

from infrarsi.patches import REGISTRY

DATA = Path(__file__).parents[1] / "test_data" / "patches"
CASES = [
    pytest.param(name, path, id=f"{name}/{path.name.removesuffix('.before.py')}")
    for name in ("sdpa_attention", "moe_batched_dispatch")
    for path in sorted((DATA / name).glob("*.before.py"))
]


def _load(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)
    return module


def _run(module: types.ModuleType):
    torch.manual_seed(0)
    net, x = module.build()
    x = x.clone().requires_grad_(True)
    out = net(x)
    # a fixed random projection, so every output element reaches the gradient
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    (out * weight).sum().backward()
    grads = {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}
    return out.detach(), x.grad.clone(), grads


@pytest.mark.parametrize("name,before", CASES)
def test_same_outputs_and_gradients(name, before):
    source = before.read_text()
    patched = REGISTRY[name].rewrite(source)
    assert patched is not None
    out_a, dx_a, grads_a = _run(_load(source, "before"))
    out_b, dx_b, grads_b = _run(_load(patched, "after"))
    torch.testing.assert_close(out_b, out_a, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(dx_b, dx_a, atol=1e-5, rtol=1e-5)
    assert grads_a.keys() == grads_b.keys() and grads_a
    for key in grads_a:
        torch.testing.assert_close(grads_b[key], grads_a[key], atol=1e-5, rtol=1e-5, msg=key)


def test_a_wrong_rewrite_is_caught():
    """The comparison can fail: attention without the mask is a different function."""
    source = (DATA / "sdpa_attention" / "nanogpt.before.py").read_text()
    patched = REGISTRY["sdpa_attention"].rewrite(source).replace("is_causal=True", "is_causal=False")
    out_a, _, _ = _run(_load(source, "before"))
    out_b, _, _ = _run(_load(patched, "after"))
    assert not torch.allclose(out_a, out_b, atol=1e-3)
