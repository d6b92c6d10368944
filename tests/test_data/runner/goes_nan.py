"""Diverges: the loss becomes NaN at step 3 and the job carries on, as a real one would."""

import argparse

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
args = parser.parse_args()

for it in range(args.max_iters):
    loss = float("nan") if it >= 3 else 4.0 * 0.9**it
    probe.step(loss=loss, tokens=args.batch_size * args.block_size)
