"""A paced job whose loop carries periodic work, as real loops do: a callback after the first
iteration that samples and saves a checkpoint (two seconds), and an evaluation every five steps.

Like the paced job, a real process stepping through the probe at a pace its knobs set (no torch),
so a test knows what is faster; the periodic work is the same in every run, whatever the knobs.
"""

import argparse
import time

from data import loss_at
from infrarsi import probe


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=16, help="global sequences per optimizer step")
    parser.add_argument("--block_size", type=int, default=8, help="tokens per sequence")
    parser.add_argument("--micro_batch_size", type=int, default=2, help="sequences per micro-step")
    parser.add_argument("--threads", type=int, default=1, help="worker threads")
    parser.add_argument("--max_iters", type=int, default=100, help="optimizer steps")
    parser.add_argument("--eval_interval", type=int, default=5, help="evaluate every this many steps")
    parser.add_argument("--seed", type=int, default=1337, help="random seed")
    args = parser.parse_args()

    assert args.batch_size % args.micro_batch_size == 0, "micro_batch_size must divide batch_size"
    step_s = 0.010 + 0.012 * (args.batch_size // args.micro_batch_size)
    step_s *= 1.0 if args.threads >= 2 else 1.3
    for it in range(args.max_iters):
        with probe.phase("forward"):
            time.sleep(step_s * 0.4)
        with probe.phase("backward"):
            time.sleep(step_s * 0.5)
        with probe.phase("optimizer"):
            time.sleep(step_s * 0.1)
        loss = loss_at(it)
        probe.step(loss=loss, tokens=args.batch_size * args.block_size)
        if it == 0:
            time.sleep(2.0)  # the callback: sample some text, save a checkpoint
        if it % args.eval_interval == 0:
            time.sleep(0.3)  # evaluate on held-out batches
        print(f"iter {it}: loss {loss:.4f}", flush=True)


if __name__ == "__main__":
    main()
