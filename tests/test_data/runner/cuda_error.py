"""Fails at its third step with the exception torch raises for an --error kind, with a message in
torch's own words (the caching allocator's out-of-memory message from an H200; cuBLAS failing to
allocate its workspace; Triton out of shared memory, which is not running out of device memory).
Under torchrun only rank 1 fails, as one rank of a real job does."""

import argparse
import os

import torch

from infrarsi import probe

MESSAGES = {
    "oom": (torch.cuda.OutOfMemoryError,
            "CUDA out of memory. Tried to allocate 3.07 GiB. GPU 0 has a total capacity of 139.80 GiB of which "
            "1.52 GiB is free. Including non-PyTorch memory, this process has 138.27 GiB memory in use. Of the "
            "allocated memory 134.61 GiB is allocated by PyTorch, and 2.91 GiB is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
            "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"),
    "cublas": (RuntimeError, "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
    "shared_memory": (RuntimeError, "triton.runtime.errors.OutOfResources: out of resource: shared memory, "
                                    "Required: 262144, Hardware limit: 232448. Reducing block sizes or "
                                    "`num_stages` may help."),
}

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
parser.add_argument("--error", choices=sorted(MESSAGES), default="oom")
args = parser.parse_args()

for it in range(args.max_iters):
    if it == 2 and os.environ.get("RANK", "1") == "1":
        kind, message = MESSAGES[args.error]
        raise kind(message)
    probe.step(loss=4.0 * 0.9**it, tokens=args.batch_size * args.block_size)
