"""set_defaults before/after in the three styles: only the value changes, comments and layout stay."""

from __future__ import annotations

import pytest

from infrarsi.knobs.rewrite import KnobRewriteError, set_defaults

ARGPARSE = '''\
import argparse
p = argparse.ArgumentParser()
p.add_argument("--micro-batch-size", type=int, default=4,  # per forward pass
               help="sequences")
p.add_argument("--compile", action="store_true")
p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
p.add_argument("--lr", default=1e-3)
p.set_defaults(lr=3e-4)
'''

ARGPARSE_AFTER = '''\
import argparse
p = argparse.ArgumentParser()
p.add_argument("--micro-batch-size", type=int, default=8,  # per forward pass
               help="sequences")
p.add_argument("--compile", action="store_true", default=True)
p.add_argument("--dtype", choices=["float32", "bfloat16"], default='bfloat16')
p.add_argument("--lr", default=0.001)
p.set_defaults(lr=0.001)
'''


def test_argparse_defaults_by_dest():
    values = {"micro_batch_size": 8, "compile": True, "dtype": "bfloat16", "lr": 0.001}
    assert set_defaults(ARGPARSE, values) == ARGPARSE_AFTER


GLOBALS = '''\
# system
batch_size = 12 # micro-batch size
compile = True # use PyTorch 2.0
device = 'cuda'
exec(open('configurator.py').read())
if ddp:
    device = f'cuda:{rank}'
def f():
    batch_size = 3
'''

GLOBALS_AFTER = '''\
# system
batch_size = 4 # micro-batch size
compile = False # use PyTorch 2.0
device = 'cpu'
exec(open('configurator.py').read())
if ddp:
    device = f'cuda:{rank}'
def f():
    batch_size = 3
'''


def test_globals_only_the_top_level_declaration():
    assert set_defaults(GLOBALS, {"batch_size": 4, "compile": False, "device": "cpu"}) == GLOBALS_AFTER


DATACLASS = '''\
from dataclasses import dataclass, field

@dataclass
class TrainConfig:
    micro_batch_size: int = 8  # per step
    activation_checkpointing: bool = False
    run_name: str = field(default="base", metadata={"help": "x"})

class NotAConfig:
    micro_batch_size: int = 99
'''

DATACLASS_AFTER = '''\
from dataclasses import dataclass, field

@dataclass
class TrainConfig:
    micro_batch_size: int = 2  # per step
    activation_checkpointing: bool = True
    run_name: str = field(default='trial', metadata={"help": "x"})

class NotAConfig:
    micro_batch_size: int = 99
'''


def test_dataclass_fields():
    values = {"micro_batch_size": 2, "activation_checkpointing": True, "run_name": "trial"}
    assert set_defaults(DATACLASS, values) == DATACLASS_AFTER


def test_unknown_names_are_an_error():
    with pytest.raises(KnobRewriteError, match="threads, zzz"):
        set_defaults(ARGPARSE, {"zzz": 1, "threads": 2, "compile": True})


def test_only_knob_values():
    with pytest.raises(KnobRewriteError, match=r"cannot write \[1\]"):
        set_defaults(GLOBALS, {"batch_size": [1]})
