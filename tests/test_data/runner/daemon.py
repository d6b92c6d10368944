"""A job that starts a daemon the classic way (fork, setsid, fork again, the middle process exits),
so the daemon is no longer in the trial's process tree; its command line carries --marker. Then
trains like good.py."""

import argparse
import os
import sys
import time

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
parser.add_argument("--marker", default="")
args = parser.parse_args()

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", args.marker])
    os._exit(0)
os.wait()
print(f"daemon started, token {os.environ.get('INFRARSI_TRIAL_TOKEN')}", flush=True)
for it in range(args.max_iters):
    time.sleep(0.01)
    loss = 4.0 * 0.9**it
    probe.step(loss=loss, tokens=args.batch_size * args.block_size)
    print(f"iter {it}: loss {loss:.4f}, time 10.00ms")
