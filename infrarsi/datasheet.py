"""What the hardware can do on paper: GPU datasheet peaks and the dtype names training scripts use.

No torch here: the report prices a candidate's MFU from it without measuring anything
(``infrarsi.hardware`` measures; it uses these tables for known GPUs).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from infrarsi.records.hardware import PeakFlops

_DTYPE_ALIASES = {
    "float32": "fp32", "float": "fp32", "fp32": "fp32", "32": "fp32",
    "tf32": "tf32",
    "bfloat16": "bf16", "bf16": "bf16", "bf16-mixed": "bf16",
    "float16": "fp16", "half": "fp16", "fp16": "fp16", "16": "fp16", "16-mixed": "fp16",
}


def normalize_dtype(name: str) -> str:
    """fp32 | tf32 | bf16 | fp16 from the spellings training scripts use."""
    key = str(name).lower().removeprefix("torch.")
    if key not in _DTYPE_ALIASES:
        raise ValueError(f"unknown dtype {name!r}; expected one of {sorted(set(_DTYPE_ALIASES))}")
    return _DTYPE_ALIASES[key]


# --- datasheet peaks -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DatasheetEntry:
    name: str
    pattern: str
    """Regex matched (case-insensitively) against ``torch.cuda.get_device_name()``."""
    tflops: dict[str, float]
    """Dense peak TFLOP/s per dtype (vendors quote 2:4 sparsity as 2× these; not used here)."""
    source: str
    nvlink_gbs: float | None = None
    """GB/s each GPU moves in one direction over the switched NVLink fabric that joins a node's GPUs
    all to all (half the datasheet's bidirectional figure); None where the GPUs are not so joined
    (PCIe cards, bridged pairs, V100's cube mesh) or the datasheet does not say."""


# Order matters: the first matching pattern wins, so variants come before the family name.
DATASHEET: tuple[DatasheetEntry, ...] = (
    DatasheetEntry(
        name="H200 NVL",
        pattern=r"H200.*NVL",
        tflops={"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0},
        source="NVIDIA H200 Tensor Core GPU datasheet, H200 NVL column, sparse values halved "
        "(https://www.nvidia.com/en-us/data-center/h200/)",
    ),
    DatasheetEntry(
        name="H200 SXM",
        pattern=r"H200",
        tflops={"bf16": 989.5, "fp16": 989.5, "tf32": 494.5, "fp32": 67.0},
        source="NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column, sparse values halved; NVLink "
        "900 GB/s (https://www.nvidia.com/en-us/data-center/h200/)",
        nvlink_gbs=450.0,
    ),
    DatasheetEntry(
        name="H100 NVL",
        pattern=r"H100.*NVL",
        tflops={"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0},
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column, sparse values halved "
        "(https://www.nvidia.com/en-us/data-center/h100/)",
    ),
    DatasheetEntry(
        name="H100 PCIe",
        pattern=r"H100.*PCIe",
        tflops={"bf16": 756.5, "fp16": 756.5, "tf32": 378.0, "fp32": 51.0},
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column, sparse values halved "
        "(https://www.nvidia.com/en-us/data-center/h100/)",
    ),
    DatasheetEntry(
        name="H100 SXM",
        pattern=r"H100",
        tflops={"bf16": 989.5, "fp16": 989.5, "tf32": 494.5, "fp32": 67.0},
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column, sparse values halved; NVLink "
        "900 GB/s (https://www.nvidia.com/en-us/data-center/h100/)",
        nvlink_gbs=450.0,
    ),
    DatasheetEntry(
        name="A100 PCIe",
        pattern=r"A100.*PCIe",
        tflops={"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5},
        source="NVIDIA A100 Tensor Core GPU datasheet, 40GB/80GB PCIe columns; NVLink only as a bridge "
        "between pairs (https://www.nvidia.com/en-us/data-center/a100/)",
    ),
    DatasheetEntry(
        name="A100 SXM",
        pattern=r"A100",
        tflops={"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5},
        source="NVIDIA A100 Tensor Core GPU datasheet, 40GB/80GB SXM columns (the PCIe cards' peaks are "
        "the same); NVLink 600 GB/s (https://www.nvidia.com/en-us/data-center/a100/)",
        nvlink_gbs=300.0,
    ),
    DatasheetEntry(
        name="L40S",
        pattern=r"\bL40S\b",
        tflops={"bf16": 362.05, "fp16": 362.05, "tf32": 183.0, "fp32": 91.6},
        source="NVIDIA L40S GPU datasheet, dense values (https://www.nvidia.com/en-us/data-center/l40s/)",
    ),
    DatasheetEntry(
        name="L40",
        pattern=r"\bL40\b",
        tflops={"bf16": 181.05, "fp16": 181.05, "tf32": 90.5, "fp32": 90.5},
        source="NVIDIA L40 GPU datasheet, dense values (https://www.nvidia.com/en-us/data-center/l40/)",
    ),
    DatasheetEntry(
        name="L4",
        pattern=r"\bL4\b",
        tflops={"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3},
        source="NVIDIA L4 Tensor Core GPU datasheet, sparse values halved "
        "(https://www.nvidia.com/en-us/data-center/l4/)",
    ),
    DatasheetEntry(
        name="A10",
        pattern=r"\bA10\b",
        tflops={"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2},
        source="NVIDIA A10 Tensor Core GPU datasheet, dense values "
        "(https://www.nvidia.com/en-us/data-center/products/a10-gpu/)",
    ),
    DatasheetEntry(
        name="V100S PCIe",
        pattern=r"V100S",
        tflops={"fp16": 130.0, "fp32": 16.4},
        source="NVIDIA V100 Tensor Core GPU datasheet, V100S PCIe column; Volta has no bf16 or tf32 "
        "units (https://www.nvidia.com/en-us/data-center/v100/)",
    ),
    DatasheetEntry(
        name="V100 PCIe",
        pattern=r"V100.*PCIE",
        tflops={"fp16": 112.0, "fp32": 14.0},
        source="NVIDIA V100 Tensor Core GPU datasheet, V100 PCIe column; Volta has no bf16 or tf32 "
        "units (https://www.nvidia.com/en-us/data-center/v100/)",
    ),
    DatasheetEntry(
        name="V100 SXM2",
        pattern=r"V100",
        tflops={"fp16": 125.0, "fp32": 15.7},
        source="NVIDIA V100 Tensor Core GPU datasheet, V100 SXM2 column; Volta has no bf16 or tf32 "
        "units (https://www.nvidia.com/en-us/data-center/v100/)",
    ),
    DatasheetEntry(
        name="RTX 4090",
        pattern=r"RTX 4090",
        tflops={"bf16": 165.2, "fp16": 165.2, "tf32": 82.6, "fp32": 82.6},
        source="NVIDIA Ada Lovelace GPU Architecture whitepaper, Appendix A (GeForce RTX 4090), dense "
        "tensor rates with FP32 accumulate as PyTorch uses "
        "(https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf)",
    ),
    DatasheetEntry(
        name="RTX 3090",
        pattern=r"RTX 3090",
        tflops={"bf16": 71.0, "fp16": 71.0, "tf32": 35.6, "fp32": 35.6},
        source="NVIDIA Ampere GA102 GPU Architecture whitepaper, Appendix A (GeForce RTX 3090), dense "
        "tensor rates with FP32 accumulate as PyTorch uses "
        "(https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf)",
    ),
)


def datasheet_entry(device_name: str) -> DatasheetEntry | None:
    for entry in DATASHEET:
        if re.search(entry.pattern, device_name, re.IGNORECASE):
            return entry
    return None


def datasheet_peak(device_name: str, dtype: str) -> PeakFlops | None:
    """The datasheet's dense peak of one GPU in ``dtype``; None for a GPU or dtype it does not list."""
    entry = datasheet_entry(device_name)
    dtype = normalize_dtype(dtype)
    if entry is None or dtype not in entry.tflops:
        return None
    return PeakFlops(value=entry.tflops[dtype] * 1e12, source=entry.source, device="cuda", dtype=dtype,
                     method="datasheet")


def matmul_dtype(dtype_setting: str | None, patches: Sequence[str], default: str) -> str:
    """The precision a configuration's matmuls run in: its dtype setting (``default`` when it has
    none or one doctor does not know), TF32 for float32 under the tf32_matmul patch."""
    dtype = default
    if dtype_setting is not None:
        try:
            dtype = normalize_dtype(dtype_setting)
        except ValueError:
            return default
    return "tf32" if dtype == "fp32" and "tf32_matmul" in patches else dtype
