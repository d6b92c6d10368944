import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch_size", type=int, default=16, help="global batch, all ranks")
    p.add_argument("--micro_batch_size", type=int, default=4, help="per rank")
    p.add_argument("--block_size", type=int, default=64)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--bucket_cap_mb", type=int, default=25)
    p.add_argument("--gradient_as_bucket_view", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--static_graph", action="store_true")
    args = p.parse_args()
    dist.init_process_group("gloo")
    local_rank = int(os.environ["LOCAL_RANK"])
    model = DDP(torch.nn.Linear(64, 64), bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.AdamW(model.parameters())
    for step in range(args.steps):
        x = torch.randn(args.micro_batch_size, args.block_size, 64)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
