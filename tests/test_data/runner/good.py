"""A well-behaved job: a loss that falls by 10% a step, reported through the probe."""

import argparse
import time

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
parser.add_argument("--step_s", type=float, default=0.02, help="seconds each step takes")
parser.add_argument("--loss_shift", type=float, default=0.0, help="moves every loss: a numerics change")
args = parser.parse_args()

probe.model(params=1000, layers=1, heads=1, head_dim=8, seq_len=args.block_size)
for it in range(args.max_iters):
    with probe.phase("forward"):
        time.sleep(args.step_s)
    loss = 4.0 * 0.9**it + args.loss_shift
    probe.step(loss=loss, tokens=args.batch_size * args.block_size)
    print(f"iter {it}: loss {loss:.4f}, time {args.step_s * 1000:.2f}ms")
