"""A job that changes its own sources while it runs (what a candidate could do past the static
checks): rewrites the locked helpers.py, plants bytecode for a module it imports later, adds a
module, a symbolic link, or writes into the shared bytecode prefix. It reports its steps like good.py; the trial must still fail."""

import argparse
import importlib.util
import marshal
import os
import sys
import time
from pathlib import Path

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
parser.add_argument("--how", choices=["nothing", "locked", "pyc", "module", "symlink", "prefix"], default="nothing")
args = parser.parse_args()

if args.how == "locked":
    Path("helpers.py").write_text("SCALE = 0.5\n")
elif args.how == "pyc":
    # Bytecode for late.py that says "planted", stamped with the real source's mtime and size, in
    # the __pycache__ Python would read without a pycache prefix.
    source = Path("late.py")
    stat = source.stat()
    code = compile('VALUE = "planted"\n', str(source.resolve()), "exec")
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") \
        + (int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    cache = Path(importlib.util.cache_from_source(str(source.resolve())) if sys.pycache_prefix is None
                 else Path("__pycache__") / f"late.{sys.implementation.cache_tag}.pyc")
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(header + marshal.dumps(code))
elif args.how == "module":
    Path("extra.py").write_text("X = 1\n")
elif args.how == "symlink":
    os.symlink("/tmp", "cache")
elif args.how == "prefix":
    # Bytecode for an installed module planted where every later trial would look it up.
    planted = Path(importlib.util.cache_from_source(importlib.util.find_spec("json").origin))
    try:
        planted.parent.mkdir(parents=True, exist_ok=True)
        planted.write_bytes(b"planted")
        print(f"prefix write accepted: {planted}")
    except OSError as err:
        print(f"prefix write refused: {err.strerror}")

import late  # noqa: E402 (imported after the planting, on purpose)

print(f"late.VALUE = {late.VALUE}; pycache prefix {sys.pycache_prefix}; writes bytecode: {not sys.dont_write_bytecode}")
for it in range(args.max_iters):
    time.sleep(0.01)
    loss = 4.0 * 0.9**it
    probe.step(loss=loss, tokens=args.batch_size * args.block_size)
