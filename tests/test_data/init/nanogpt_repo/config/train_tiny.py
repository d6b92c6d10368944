# a model small enough to train on a laptop CPU in a minute
# launch as: python train.py config/train_tiny.py

out_dir = 'out-tiny'
eval_interval = 250
eval_iters = 2
log_interval = 10

gradient_accumulation_steps = 4
batch_size = 4
block_size = 32

n_layer = 2
n_head = 2
n_embd = 32
vocab_size = 128

learning_rate = 3e-3
max_iters = 2000
lr_decay_iters = 2000
min_lr = 3e-4
warmup_iters = 20

device = 'cpu'
compile = False
