"""Counts every token twice: its tokens per step differ from the contract's."""

import argparse

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
args = parser.parse_args()

for it in range(args.max_iters):
    probe.step(loss=4.0 * 0.9**it, tokens=2 * args.batch_size * args.block_size)
