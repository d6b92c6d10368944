"""A job that first tries to reach --address (host:port) over TCP and says whether it could. Then
trains like good.py."""

import argparse
import socket
import time

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
parser.add_argument("--address", default="")
args = parser.parse_args()

host, port = args.address.rsplit(":", 1)
try:
    socket.create_connection((host, int(port)), timeout=2).close()
    print("connect: reached", flush=True)
except OSError as err:
    print(f"connect: refused ({err})", flush=True)

for it in range(args.max_iters):
    time.sleep(0.01)
    probe.step(loss=4.0 * 0.9**it, tokens=args.batch_size * args.block_size)
