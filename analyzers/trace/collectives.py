"""What a collective (communication between ranks) looks like in every trace we read, declared once.

- NCCL's GPU kernels, in both naming eras: `ncclKernel_AllReduce_RING_LL_Sum_float(...)` (NCCL up to
  2.18; the DLRM traces) and `ncclDevKernel_SendRecv(...)` (NCCL 2.19 and later: the 2-GPU nsys
  exports). A tool that knows only one era finds no communication in the other (HolisticTraceAnalysis
  reads only the first).
- the host side of a collective: PyTorch's `nccl:all_reduce` / `gloo:all_reduce` operators and
  annotations (`record_param_comms`), and the built-in workload's own records of its DDP buckets.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from analyzers.trace import arrays

NCCL_KERNEL_PREFIXES = ("ncclKernel_", "ncclDevKernel_")
HOST_COLLECTIVE_PREFIXES = ("nccl:", "gloo:")
_KIND = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")


def is_nccl_kernel(name: str) -> bool:
    return name.startswith(NCCL_KERNEL_PREFIXES)


def is_host_collective(name: str) -> bool:
    return name.startswith(HOST_COLLECTIVE_PREFIXES)


def kind_of(name: str) -> str:
    """`AllReduce`, `SendRecv`, `AllGather` ... from an NCCL kernel's name; the host op's own name else."""
    m = _KIND.match(name)
    return m.group(1) if m else name


def nccl_mask(names: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Which of a kernel table's names are NCCL's (either era). Dictionary-encoded names (a reader's
    in-memory tables) are tested once per distinct name."""
    if pa.types.is_dictionary(names.type):
        text = arrays.dictionary(names if isinstance(names, pa.ChunkedArray) else pa.chunked_array([names]))
        return pc.take(nccl_mask(text.dictionary), text.indices)
    masks = [pc.starts_with(names, prefix) for prefix in NCCL_KERNEL_PREFIXES]
    out = masks[0]
    for m in masks[1:]:
        out = pc.or_(out, m)
    return out
