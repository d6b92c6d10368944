"""A job that, before training, does what untested code could: prints its whole environment, and
tries to write to each path in --targets (comma-separated) and under its home. Then trains like good.py."""

import argparse
import json
import os
import time

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
parser.add_argument("--targets", default="")
args = parser.parse_args()

print("ENV " + json.dumps(dict(os.environ)), flush=True)
for target in [t for t in args.targets.split(",") if t] + [os.path.expanduser("~/pwned.txt")]:
    try:
        with open(target, "a") as f:
            f.write("pwned\n")
        print(f"write {target}: written", flush=True)
    except OSError as err:
        print(f"write {target}: refused ({err.strerror})", flush=True)

for it in range(args.max_iters):
    time.sleep(0.01)
    loss = 4.0 * 0.9**it
    probe.step(loss=loss, tokens=args.batch_size * args.block_size)
    print(f"iter {it}: loss {loss:.4f}, time 10.00ms")
