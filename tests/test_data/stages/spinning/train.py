"""The paced stand-in (tests/test_data/stages/paced) with its steps spent on the CPU, not asleep:
each phase is a fixed amount of work, so another process on the job's cores slows it down (the
interference tests, issue 20). Its loss curve comes from data.py, which init locks.
"""

import argparse
import time

WORK_PER_S = 20_000_000
"""Loop iterations standing for one second of step time (about that on the development machines)."""


def work(seconds: float) -> None:
    for _ in range(int(seconds * WORK_PER_S)):
        pass

from data import loss_at
from infrarsi import probe


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=16, help="global sequences per optimizer step")
    parser.add_argument("--block_size", type=int, default=8, help="tokens per sequence")
    parser.add_argument("--micro_batch_size", type=int, default=2, help="sequences per micro-step")
    parser.add_argument("--threads", type=int, default=1, help="worker threads")
    parser.add_argument("--activation_checkpointing", action="store_true", help="recompute activations")
    parser.add_argument("--optimizer_impl", choices=["for-loop", "foreach"], default="for-loop", help="optimizer loop")
    parser.add_argument("--max_iters", type=int, default=100, help="optimizer steps")
    parser.add_argument("--seed", type=int, default=1337, help="random seed")
    args = parser.parse_args()

    assert args.batch_size % args.micro_batch_size == 0, "micro_batch_size must divide batch_size"
    accum = args.batch_size // args.micro_batch_size
    # Each micro-step has a fixed overhead, so bigger micro-batches are faster...
    step_s = 0.010 + 0.012 * accum
    step_s *= 1.0 if args.threads >= 2 else 1.3
    step_s *= 1.15 if args.activation_checkpointing else 1.0
    step_s *= 0.9 if args.optimizer_impl == "foreach" else 1.0
    # ...and hold more activations, unless they are recomputed.
    activation_mb = 12 * args.micro_batch_size * (0.5 if args.activation_checkpointing else 1.0)

    held = bytearray(int(activation_mb * 2**20))
    held[:: 4096] = b"x" * len(held[:: 4096])  # touch every page: resident, not just reserved
    for it in range(args.max_iters):
        t0 = time.perf_counter()
        with probe.phase("forward"):
            work(step_s * 0.4)
        with probe.phase("backward"):
            work(step_s * 0.5)
        with probe.phase("optimizer"):
            work(step_s * 0.1)
        loss = loss_at(it)
        probe.step(loss=loss, tokens=args.batch_size * args.block_size)
        print(f"iter {it}: loss {loss:.4f}, time {(time.perf_counter() - t0) * 1000:.2f}ms", flush=True)


if __name__ == "__main__":
    main()
