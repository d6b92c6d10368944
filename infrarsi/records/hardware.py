"""The machine a record was measured on, and the peak FLOP/s its MFU is measured against.

Plain values (no torch): ``infrarsi.hardware`` measures them, every record that names a machine
carries them.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

from infrarsi.byte_units import GIB


@dataclass(frozen=True, slots=True)
class HardwareFingerprint:
    cpu_model: str
    cpu_isa: str
    """The SIMD level torch dispatches to (AVX2, AVX512…): it decides the CPU matmul rate."""
    cpu_cores: int
    """Logical CPUs this process may run on (its affinity set)."""
    cpu_physical_cores: int
    torch_threads: int
    """torch's intra-op thread count in the measuring process (informational, not in ``id``)."""
    ram_bytes: int
    gpu_name: str
    """Empty when no CUDA device is visible."""
    gpu_count: int
    gpu_memory_bytes: int
    """Memory of device 0."""
    torch_version: str
    cuda_version: str
    """Empty for a CPU-only torch build."""
    python_version: str

    @property
    def id(self) -> str:
        """A short stable hash of what decides speed: CPU, ISA, cores, GPUs, torch and CUDA versions."""
        key = "|".join(
            str(x)
            for x in (
                self.cpu_model, self.cpu_isa, self.cpu_cores, self.gpu_name, self.gpu_count,
                self.torch_version, self.cuda_version,
            )
        )
        return hashlib.sha256(key.encode()).hexdigest()[:12]

    @property
    def device(self) -> str:
        return "cuda" if self.gpu_count else "cpu"

    def to_dict(self) -> dict:
        return {**asdict(self), "id": self.id}

    @classmethod
    def from_dict(cls, data: dict) -> HardwareFingerprint:
        return cls(**{k: v for k, v in data.items() if k != "id"})

    def describe(self) -> str:
        cpu = f"{self.cpu_model} ({self.cpu_isa}, {self.cpu_cores} cores)"
        if not self.gpu_count:
            return f"{cpu}, torch {self.torch_version}"
        gib = self.gpu_memory_bytes / GIB
        return f"{self.gpu_count}× {self.gpu_name} ({gib:.0f} GiB), {cpu}, torch {self.torch_version} CUDA {self.cuda_version}"


@dataclass(frozen=True, slots=True)
class PeakFlops:
    value: float
    """FLOP/s of one device (one GPU, or the CPU cores at ``threads``)."""
    source: str
    """Where the number comes from: the datasheet citation, or how it was measured."""
    device: str
    dtype: str
    method: str
    """datasheet | measured."""
    threads: int = 0
    """torch threads the CPU measurement used (0 for a GPU)."""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PeakFlops:
        return cls(**data)
