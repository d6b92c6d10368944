# nanoGPT-style: knobs are module globals that configurator.py overrides from --key=value
import torch
from model import GPT

batch_size = 12
learning_rate = 6e-4
compile_model = True  # torch.compile the model (added by InfraRSI)
exec(open('configurator.py').read())

model = GPT()
if compile_model:
    model = torch.compile(model)
optimizer = model.configure_optimizers(0.1, learning_rate, (0.9, 0.95), "cpu")
while True:
    break
