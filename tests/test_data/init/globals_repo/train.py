"""nanoGPT-style training: knobs are module globals, overridden with --key=value."""
import os
import time

import torch

from infrarsi import probe
from model import GPT, GPTConfig

# -----------------------------------------------------------------------------
# default config values
out_dir = 'out'
eval_interval = 2000
log_interval = 1
# data
dataset = 'shakespeare_char'
gradient_accumulation_steps = 4 # used to simulate larger batch sizes
batch_size = 8 # if gradient_accumulation_steps > 1, this is the micro-batch size
block_size = 128
# model
n_layer = 4
n_embd = 128
n_expert = 4
top_k = 2
aux_loss_coef = 0.01
# adamw optimizer
learning_rate = 6e-4 # max learning rate
max_iters = 600000 # total number of training iterations
beta2 = 0.99
# system
device = 'cpu'
dtype = 'bfloat16' if torch.cuda.is_available() else 'float32'
compile = False # use PyTorch 2.0 to compile the model to be faster
seed = 1337
config_keys = [k for k,v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, bool, str))]
exec(open('configurator.py').read()) # overrides from command line or config file
config = {k: globals()[k] for k in config_keys} # will be useful for logging
# -----------------------------------------------------------------------------

torch.manual_seed(seed)
model = GPT(GPTConfig(block_size=block_size, n_layer=n_layer, n_embd=n_embd, n_expert=n_expert))
if compile:
    model = torch.compile(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, beta2))
iter_num = 0
while True:
    t0 = time.time()
    for micro_step in range(gradient_accumulation_steps):
        X = torch.randint(1024, (batch_size, block_size))
        logits, loss = model(X, X)
        loss = loss / gradient_accumulation_steps
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    probe.step(loss=loss.item() * gradient_accumulation_steps, tokens=batch_size * block_size * gradient_accumulation_steps)
    iter_num += 1
    if iter_num > max_iters:
        break
