"""Fails at its third step with an error whose message the runner must report."""

import argparse

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
args = parser.parse_args()

for it in range(args.max_iters):
    if it == 2:
        raise RuntimeError("shape mismatch in attention: 8 vs 16")
    probe.step(loss=4.0 * 0.9**it, tokens=args.batch_size * args.block_size)
