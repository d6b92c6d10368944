"""No probe: only nanoGPT-style log lines, which the runner must parse."""

import argparse
import time

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
args = parser.parse_args()

print("compiling... done")
for it in range(args.max_iters):
    t0 = time.time()
    time.sleep(0.03)
    loss = 4.0 * 0.9**it
    print(f"iter {it}: loss {loss:.4f}, time {(time.time() - t0) * 1000:.2f}ms, mfu 12.00%")
