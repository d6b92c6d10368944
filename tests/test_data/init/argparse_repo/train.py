"""Train a tiny LM on synthetic tokens."""
import argparse

import torch

from data import batches
from model import TinyLM


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=16, help="global sequences per optimizer step")
    parser.add_argument("--micro-batch-size", type=int, default=8, help="sequences per forward pass")
    parser.add_argument("--block_size", type=int, default=64)
    parser.add_argument("--n_layer", type=int, default=2)
    parser.add_argument("--n_embd", type=int, default=128)
    parser.add_argument("--vocab_size", type=int, default=512)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--max_iters", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--no-fused", dest="fused", action="store_false")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--optimizer_impl", choices=("for-loop", "foreach", "fused"), default="foreach")
    parser.add_argument("--num_workers", type=int, default=0)
    parser.add_argument("--out_dir", default="out")  # where checkpoints go
    parser.add_argument("--resume", default=None)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    model = TinyLM(args.vocab_size, args.n_embd, args.n_layer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    accum = args.batch_size // args.micro_batch_size
    data = batches(args.vocab_size, args.micro_batch_size, args.block_size, args.seed)
    for it in range(args.max_iters):
        for _ in range(accum):
            x, y = next(data)
            loss = model(x, y) / accum
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"iter {it}: loss {loss.item() * accum:.4f}")


if __name__ == "__main__":
    main()
