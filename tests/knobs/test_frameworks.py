"""Framework settings from the schema in infrarsi/knobs/data/frameworks.toml (static: nothing imported or run)."""

from __future__ import annotations

import textwrap

from infrarsi.stages.init import init

HF_SCRIPT = """
from dataclasses import dataclass, field
from transformers import HfArgumentParser, Trainer, TrainingArguments

@dataclass
class DataArgs:
    block_size: int = 128

def main():
    parser = HfArgumentParser((DataArgs, TrainingArguments))
    data_args, training_args = parser.parse_args_into_dataclasses()
    Trainer(model=None, args=training_args).train()

if __name__ == "__main__":
    main()
"""


def test_training_arguments_from_the_command_line(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(HF_SCRIPT))
    command = ["python", "train.py", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "2",
               "--learning_rate", "1e-3", "--output_dir", "out"]
    result = init(tmp_path, command=command, budget_bytes=2**30)
    assert result.ok, result.message
    c = result.contract
    knob = {k.name: k for k in c.knobs}
    assert (knob["per_device_train_batch_size"].role, knob["per_device_train_batch_size"].default) == ("micro_batch", 4)
    assert knob["gradient_accumulation_steps"].role == "grad_accum"
    assert c.workload.global_batch == 8 and knob["per_device_train_batch_size"].domain == [1, 2, 4, 8]
    assert knob["learning_rate"].role == "workload" and not knob["learning_rate"].tunable
    for name, role in (("bf16", "dtype"), ("torch_compile", "compile"), ("gradient_checkpointing",
                       "activation_checkpointing"), ("dataloader_num_workers", "dataloader_workers"),
                       ("optim", "optimizer_impl")):
        assert knob[name].role == role and knob[name].tunable, name
    assert knob["dataloader_num_workers"].flag == "--dataloader_num_workers"
    assert knob["block_size"].role == "workload"


def test_no_framework_no_settings(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(2, requires_grad=True)\n"
                                       "for i in range(3):\n    x.sum().backward()\n")
    result = init(tmp_path, budget_bytes=2**30)
    assert result.ok, result.message
    assert not any(k.name == "per_device_train_batch_size" for k in result.contract.knobs)
