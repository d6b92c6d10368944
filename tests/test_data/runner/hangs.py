"""Reports one step, then hangs, with a helper process in a session of its own (as torchrun's
workers are), so only a walk of the whole tree can find it. No torch: the probe's call is the step
(the launcher's probe mode), so the step comes quickly whatever the machine's load."""

import argparse
import os
import subprocess
import sys
import time

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
args = parser.parse_args()

helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
# Pids inside the sandbox are its pid namespace's: the test finds the trial's processes by the
# token every one of them inherits.
print(f"helper pid {helper.pid} token {os.environ.get('INFRARSI_TRIAL_TOKEN')}", flush=True)
probe.step(loss=4.0, tokens=args.batch_size * args.block_size)
time.sleep(600)
