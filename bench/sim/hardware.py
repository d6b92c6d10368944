"""GPUs and clusters as data: the datasheet figures the simulated training step is priced with.

Every figure is the vendor's, per GPU; docs/sim.md names the datasheet each comes from. Bandwidths
are bytes per second in one direction (the rate a ring collective moves data at), peaks are dense
(no 2:4 sparsity), HBM capacities binary (a datasheet's "80GB" A100 reports 81,920 MiB). The peaks
and NVLink bandwidths are ``infrarsi.datasheet``'s, the table measured runs and the priors are priced with.
"""

from __future__ import annotations

from dataclasses import dataclass

from infrarsi.byte_units import GIB
from infrarsi.datasheet import datasheet_entry

GB = 10**9


@dataclass(frozen=True, slots=True)
class GPU:
    """One accelerator and its links, as its datasheet states them."""

    name: str
    peak_flops: float
    """Dense bf16 tensor-core FLOP/s."""
    hbm_bytes: int
    hbm_bw: float
    """HBM bytes per second."""
    nvlink_bw: float
    """NVLink bytes per second per direction (half the datasheet's bidirectional figure)."""
    nic_bw: float
    """Inter-node bytes per second per direction of the one NIC each GPU of a node has."""


def _bf16_peak(name: str) -> float:
    entry = datasheet_entry(name)
    assert entry is not None, name
    return entry.tflops["bf16"] * 1e12


def _nvlink(name: str) -> float:
    entry = datasheet_entry(name)
    assert entry is not None and entry.nvlink_gbs is not None, name
    return entry.nvlink_gbs * GB


A100_80GB = GPU(name="A100-80GB-SXM", peak_flops=_bf16_peak("A100"), hbm_bytes=80 * GIB, hbm_bw=2039 * GB,
                nvlink_bw=_nvlink("A100 SXM"), nic_bw=200e9 / 8)
H100_SXM = GPU(name="H100-SXM-80GB", peak_flops=_bf16_peak("H100 SXM"), hbm_bytes=80 * GIB, hbm_bw=3350 * GB,
               nvlink_bw=_nvlink("H100 SXM"), nic_bw=400e9 / 8)
H200 = GPU(name="H200-SXM-141GB", peak_flops=_bf16_peak("H200 SXM"), hbm_bytes=141 * GIB, hbm_bw=4800 * GB,
           nvlink_bw=_nvlink("H200 SXM"), nic_bw=400e9 / 8)


@dataclass(frozen=True, slots=True)
class Cluster:
    """``gpus`` identical GPUs, ``gpus_per_node`` to a node (NVLink inside, one NIC per GPU between)."""

    gpu: GPU
    gpus: int
    gpus_per_node: int = 8

    def ring_bw(self, size: int, stride: int) -> float:
        """Bytes per second per direction a ring over ``size`` ranks ``stride`` apart moves data at.

        Ranks are numbered node by node. A ring inside one node runs on NVLink; one that spans
        nodes crosses each node boundary once per channel, and the node's ``k`` members of the
        group drive ``k`` NICs at once, so it runs at ``k`` NICs' rate, NVLink at most.
        """
        if size <= 1 or size * stride <= self.gpus_per_node:
            return self.gpu.nvlink_bw
        members = max(1, min(size, self.gpus_per_node // stride))
        return min(self.gpu.nvlink_bw, members * self.gpu.nic_bw)
