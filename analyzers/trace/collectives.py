"""What a collective (communication between ranks) looks like in every trace we read, declared once.

- NCCL's GPU kernels, in both naming eras: `ncclKernel_AllReduce_RING_LL_Sum_float(...)` (NCCL up to
  2.18; the DLRM traces) and `ncclDevKernel_SendRecv(...)` (NCCL 2.19 and later: the 2-GPU nsys
  exports). A tool that knows only one era finds no communication in the other (HolisticTraceAnalysis
  reads only the first).
- every other kernel the kernel classes call communication (DeepEP's `dpsk::ep::internode::dispatch`,
  vLLM's `cross_device_reduce_*`, RCCL): `comm_mask`, which the ranks' tables use.
- the host side of a collective: PyTorch's `nccl:all_reduce` / `gloo:all_reduce` operators and
  annotations (`record_param_comms`), and the built-in workload's own records of its DDP buckets.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from analyzers.trace import arrays, kernel_classes

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


def comm_mask(names: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Which of a kernel table's names are communication by the kernel classes (NCCL in both eras, RCCL,
    DeepEP's and other expert-parallel all-to-all, custom all-reduce): the same kernels every table calls
    communication count as communication in the ranks' tables too."""
    if isinstance(names, pa.ChunkedArray):
        names = names.combine_chunks() if names.num_chunks else pa.array([], pa.string())
    return pc.equal(kernel_classes.classify(names), pa.scalar(COMMUNICATION, pa.string()))


COMMUNICATION = "communication"
"""The kernel class (`analyzers.trace.kernel_classes`) of every collective's kernel."""
assert COMMUNICATION in kernel_classes.BY_KEY
