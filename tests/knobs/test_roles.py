"""Roles from what the code does with a knob's value (infrarsi/knobs/dataflow.py, roles.py): static, no trial."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from infrarsi.knobs.discover import discover
from infrarsi.knobs.entry import find_entry
from infrarsi.knobs.roles import assign_roles
from infrarsi.knobs.source import ParsedFile, parse

HEAD = "import argparse\nimport torch\nfrom torch.utils.data import DataLoader\np = argparse.ArgumentParser()\n"


def roles(tmp_path: Path, files: dict[str, str]) -> dict[str, tuple[str, str]]:
    for rel, text in files.items():
        (tmp_path / rel).write_text(textwrap.dedent(text))
    ep = find_entry(tmp_path, "train.py")
    found = discover(tmp_path, ep)
    readers = [ParsedFile(rel, parse(tmp_path, rel)) for rel in found.files]
    return {name: (r.rule.role, r.rule.aspect) for name, r in assign_roles(readers, found.knobs, found.style).items()}


def argparse_script(args: str, body: str) -> str:
    return HEAD + textwrap.dedent(args) + "args = p.parse_args()\n" + textwrap.dedent(body)


LOOP_ACCUM = """
for step in range(10):
    for _ in range(args.{accum}):
        x, y = next(it)
        loss = model(x, y) / args.{accum}
        loss.backward()
    opt.step()
"""

LOOP_PLAIN = """
for step in range(10):
    for x, y in loader:
        loss = model(x, y)
        loss.backward()
        opt.step()
"""


@pytest.mark.parametrize("name", ["batch_size", "bsz", "per_step_examples", "n"])
def test_loader_batch_with_an_accumulation_knob_is_the_micro_batch(tmp_path, name):
    script = argparse_script(
        f'p.add_argument("--{name}", type=int, default=4)\np.add_argument("--k", type=int, default=2)\n',
        f"loader = DataLoader(ds, batch_size=args.{name}, shuffle=True)\nit = iter(loader)\n"
        + LOOP_ACCUM.format(accum="k"),
    )
    found = roles(tmp_path, {"train.py": script})
    assert found[name][0] == "micro_batch" and found["k"][0] == "grad_accum"


def test_a_string_that_picks_the_loss_divisor_is_no_accumulation_count(tmp_path):
    script = argparse_script(
        'p.add_argument("--reduction", default="mean")\n',
        "loader = DataLoader(ds, batch_size=16)\n"
        "for x, y in loader:\n"
        "    loss = crit(model(x), y, reduction=args.reduction) / (16 if args.reduction == 'sum' else 1)\n"
        "    loss.backward()\n"
        "    opt.step()\n",
    )
    assert roles(tmp_path, {"train.py": script})["reduction"][0] != "grad_accum"


@pytest.mark.parametrize("name", ["batch_size", "micro_batch_size", "mbs", "per_device_train_batch_size"])
def test_a_batch_with_nothing_accumulating_is_the_workload_whatever_its_name(tmp_path, name):
    kwargs = f"kw = {{'batch_size': args.{name}}}\nloader = DataLoader(ds, **kw)\n"
    found = roles(tmp_path, {"train.py": argparse_script(f'p.add_argument("--{name}", type=int, default=64)\n',
                                                         kwargs + LOOP_PLAIN)})
    assert found[name] == ("workload", "global_batch")


def test_accumulation_derived_from_a_global_batch_in_tokens(tmp_path):
    script = argparse_script(
        """
        p.add_argument("--B", type=int, default=2)
        p.add_argument("--T", type=int, default=64)
        p.add_argument("--total", type=int, default=512, help="tokens per optimizer step")
        """,
        """
        B, T = args.B, args.T
        accum = args.total // (B * T)
        def get_batch():
            ix = torch.randint(len(data) - T, (B,))
            return data[ix], data[ix + 1]
        for step in range(10):
            for micro in range(accum):
                x, y = get_batch()
                loss = model(x, y)
                loss = loss / accum
                loss.backward()
            opt.step()
        """,
    )
    found = roles(tmp_path, {"train.py": script})
    assert found["B"][0] == "micro_batch"
    assert found["total"] == ("workload", "global_tokens")
    assert found["T"][0] == "workload"


def test_micro_batch_through_a_loader_class_and_view(tmp_path):
    loader = """
    class Loader:
        def __init__(self, path, B, T):
            self.B, self.T = B, T
            self.tokens = open(path).read()
        def next_batch(self):
            B, T = self.B, self.T
            buf = self.tokens[:B * T + 1]
            return buf[:-1].view(B, T), buf[1:].view(B, T)
    """
    script = argparse_script(
        """
        p.add_argument("--mb", type=int, default=2)
        p.add_argument("--seq", type=int, default=16)
        p.add_argument("--gbs", type=int, default=8)
        p.add_argument("--path", type=str, default="x.bin")
        """,
        """
        from loader import Loader
        steps = args.gbs // args.mb
        data = Loader(args.path, args.mb, args.seq)
        for it in range(10):
            for _ in range(steps):
                x, y = data.next_batch()
                (model(x, y) / steps).backward()
            opt.step()
        """,
    )
    found = roles(tmp_path, {"train.py": script, "loader.py": loader})
    assert found["mb"][0] == "micro_batch"
    assert found["gbs"] == ("workload", "global_batch")
    assert found["path"][0] == "workload" and found["seq"][0] == "workload"


@pytest.mark.parametrize("use", [
    "torch.set_num_threads(args.{n})",
    "nt = args.{n}\nif nt > 0:\n    torch.set_num_threads(nt)",
    "def setup(count):\n    torch.set_num_threads(count)\nsetup(args.{n})",
])
@pytest.mark.parametrize("name", ["threads", "cpu", "j"])
def test_threads(tmp_path, use, name):
    script = argparse_script(f'p.add_argument("--{name}", type=int, default=2)\n', use.format(n=name) + "\n")
    assert roles(tmp_path, {"train.py": script})[name][0] == "threads"


@pytest.mark.parametrize("use,role", [
    ("DataLoader(ds, batch_size=8, num_workers=args.{n})", "dataloader_workers"),
    ("kw = dict(num_workers=args.{n})\nDataLoader(ds, batch_size=8, **kw)", "dataloader_workers"),
    ("kw = {{'batch_size': 8}}\nkw.update({{'pin_memory': args.{n}}})\nDataLoader(ds, **kw)", "dataloader_pin_memory"),
    ("if args.{n}:\n    model = torch.compile(model)", "compile"),
    ("ctx = torch.autocast('cpu', dtype=torch.bfloat16) if args.{n} else nullcontext()", "dtype"),
    ("dt = {{'fp32': torch.float32, 'bf16': torch.bfloat16}}[args.{n}]", "dtype"),
    ("opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=args.{n})", "optimizer_impl"),
    ("x = checkpoint(block, x) if args.{n} else block(x)", "activation_checkpointing"),
    ("if args.{n}:\n    torch.set_float32_matmul_precision('high')", "matmul_precision"),
    ("m = DistributedDataParallel(model, bucket_cap_mb=args.{n})\nopt = torch.optim.SGD(m.parameters(), lr=0.1)",
     "ddp_bucket_mb"),
])
def test_speed_switches(tmp_path, use, role):
    script = argparse_script('p.add_argument("--opt_x", type=int, default=0)\n', use.format(n="opt_x") + "\n")
    assert roles(tmp_path, {"train.py": script})["opt_x"][0] == role


@pytest.mark.parametrize("use,aspect", [
    ("model = torch.nn.Linear(args.{n}, 10)", "model"),
    ("torch.manual_seed(args.{n})", "seed"),
    ("opt = torch.optim.SGD(model.parameters(), lr=0.1 * args.{n})", "optim"),
    ("data = open(f'shard{{args.{n}}}.bin').read()", "data"),
    ("for x, y in loader:\n    loss = model(x, y) * args.{n}\n    loss.backward()\n    opt.step()", "loss"),
    ("if args.{n}:\n    model = torch.compile(model)\nmodel = torch.nn.Linear(args.{n}, 4)", "model"),
])
def test_workload_wins_even_for_batch_and_speed_names(tmp_path, use, aspect):
    for name in ("micro_batch_size", "compile"):
        script = argparse_script(f'p.add_argument("--{name}", type=int, default=1)\n', use.format(n=name) + "\n")
        role, found = roles(tmp_path, {"train.py": script})[name]
        assert role == "workload", (name, use)


def test_eval_loader_batch_and_logging_interval(tmp_path):
    script = argparse_script(
        """
        p.add_argument("--batch-size", type=int, default=64)
        p.add_argument("--test-batch-size", type=int, default=1000)
        p.add_argument("--log-interval", type=int, default=10)
        p.add_argument("--dry-run", action="store_true")
        """,
        """
        def train(model, loader, opt):
            for i, (x, y) in enumerate(loader):
                loss = model(x, y)
                loss.backward()
                opt.step()
                if i % args.log_interval == 0:
                    print(i, len(x), loss.item())
                    if args.dry_run:
                        break
        def test(model, loader):
            with torch.no_grad():
                for x, y in loader:
                    model(x)
        train_loader = DataLoader(ds, batch_size=args.batch_size)
        test_loader = DataLoader(ds2, batch_size=args.test_batch_size)
        train(model, train_loader, opt)
        test(model, test_loader)
        """,
    )
    found = roles(tmp_path, {"train.py": script})
    assert found["batch_size"] == ("workload", "global_batch")
    assert found["test_batch_size"][0] == "eval_batch"
    assert found["log_interval"][0] == "logging"
    assert found["dry_run"][0] == "workload"


def test_globals_through_a_config_dataclass_into_the_model(tmp_path):
    script = """
    import torch
    from model import GPT, GPTConfig
    batch_size = 8
    grad_accum = 4
    n_layer = 2
    checkpointing = False
    exec(open('configurator.py').read())
    model = GPT(GPTConfig(n_layer=n_layer, checkpointing=checkpointing))
    def get_batch():
        return torch.randint(100, (batch_size, 16))
    for it in range(10):
        for micro in range(grad_accum):
            loss = model(get_batch()) / grad_accum
            loss.backward()
        opt.step()
    """
    model = """
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint
    class GPTConfig:
        n_layer: int = 1
        checkpointing: bool = False
    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.h = nn.ModuleList([nn.Linear(4, 4) for _ in range(config.n_layer)])
        def forward(self, x):
            for block in self.h:
                x = checkpoint(block, x) if self.config.checkpointing else block(x)
            return x.sum()
    """
    found = roles(tmp_path, {"train.py": script, "model.py": model, "configurator.py": ""})
    assert found["batch_size"][0] == "micro_batch" and found["grad_accum"][0] == "grad_accum"
    assert found["n_layer"][0] == "workload" and found["checkpointing"][0] == "activation_checkpointing"


@pytest.mark.parametrize("expr,value", [("4 * 2", 8), ("2**4", 16), ("64 // 8", 8), ("-(3 - 1)", -2), ("1e-3 * 2", 2e-3)])
def test_constant_defaults_are_folded(tmp_path, expr, value):
    (tmp_path / "train.py").write_text(f"batch_size = {expr}\nexec(open('configurator.py').read())\n")
    (tmp_path / "configurator.py").write_text("")
    found = discover(tmp_path, find_entry(tmp_path, "train.py"))
    assert [(k.name, k.default) for k in found.knobs] == [("batch_size", value)]


def test_a_default_computed_from_other_globals_is_not_a_knob_but_carries_their_values(tmp_path):
    script = """
    import torch
    total = 64
    micro = 8
    accum = total // micro
    exec(open('configurator.py').read())
    def get_batch():
        return torch.randint(100, (micro, 16))
    for it in range(10):
        for _ in range(accum):
            (model(get_batch()) / accum).backward()
        opt.step()
    """
    found = roles(tmp_path, {"train.py": script, "configurator.py": ""})
    assert "accum" not in found  # recomputed by the script whenever total or micro change
    assert found["micro"][0] == "micro_batch" and found["total"] == ("workload", "global_batch")
