"""
Train a small GPT on a synthetic motif corpus, accumulating gradients over several passes.

    python train.py --rows_per_pass=4 --passes_per_update=4

Each optimizer step sees rows_per_pass * passes_per_update sequences.
"""

import argparse

import numpy as np
import torch

from data import make_corpus
from model import GPT, GPTConfig

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--rows_per_pass", type=int, default=4, help="sequences in one forward/backward pass")
parser.add_argument("--passes_per_update", type=int, default=4, help="passes whose gradients one update sums")
parser.add_argument("--context", type=int, default=32, help="tokens per sequence")
parser.add_argument("--n_layer", type=int, default=1)
parser.add_argument("--n_head", type=int, default=2)
parser.add_argument("--n_embd", type=int, default=32)
parser.add_argument("--vocab_size", type=int, default=128)
parser.add_argument("--learning_rate", type=float, default=3e-3)
parser.add_argument("--max_iters", type=int, default=300)
parser.add_argument("--seed", type=int, default=1337)
args = parser.parse_args()
print(f"{args.passes_per_update} passes of {args.rows_per_pass} sequences per update")

torch.manual_seed(args.seed)
corpus = make_corpus(args.vocab_size)
order = torch.Generator().manual_seed(args.seed)


def get_batch():
    ix = torch.randint(len(corpus) - args.context, (args.rows_per_pass,), generator=order)
    x = torch.stack([torch.from_numpy(corpus[i:i + args.context].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(corpus[i + 1:i + 1 + args.context].astype(np.int64)) for i in ix])
    return x, y


model = GPT(GPTConfig(block_size=args.context, vocab_size=args.vocab_size, n_layer=args.n_layer,
                      n_head=args.n_head, n_embd=args.n_embd))
optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
for it in range(args.max_iters):
    total = 0.0
    for _ in range(args.passes_per_update):
        X, Y = get_batch()
        _, loss = model(X, Y)
        loss = loss / args.passes_per_update
        loss.backward()
        total += loss.item()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"iter {it}: loss {total:.4f}")
