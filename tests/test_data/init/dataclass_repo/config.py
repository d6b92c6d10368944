from dataclasses import dataclass, field


@dataclass
class TrainConfig:
    global_batch_size: int = 32  # sequences per optimizer step
    micro_batch_size: int = 8
    seq_len: int = 128
    n_layer: int = 4
    learning_rate: float = 1e-3
    seed: int = 0
    num_steps: int = 500
    activation_checkpointing: bool = False
    compile: bool = False
    num_threads: int = 1
    tags: list = field(default_factory=list)
    run_name: str = field(default="baseline")
