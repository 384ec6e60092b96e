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
COMM_OPS = "comm_ops"
"""The table of the host's collective operations with their payload (a Kineto trace's `nccl:*`/`gloo:*` ranges
and their `Input Dims` and `Input type`): `COMM_OPS_COLUMNS`, a `rank` column for a run of several ranks."""
COMM_OPS_COLUMNS = ("start_ns", "end_ns", "name", "pid", "tid", "bytes", "source")
DTYPE_BYTES = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "short int": 2,
    "signed char": 1, "unsigned char": 1, "bool": 1, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "unsigned int": 4, "unsigned long": 8,
}  # fmt: skip
"""Bytes per element of the `Input type`s the PyTorch profiler writes (C++ type names)."""
BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}
"""NCCL's bus bandwidth = algorithm bandwidth x this factor of the ranks n (nccl-tests' PERFORMANCE.md): what a
ring would move per link, comparable with the hardware's peak whatever the collective."""
_HOST_KIND = (
    ("all_reduce", re.compile(r"all_?reduce", re.I)),
    ("all_gather", re.compile(r"all_?gather", re.I)),
    ("reduce_scatter", re.compile(r"reduce_?scatter", re.I)),
    ("all_to_all", re.compile(r"all_?to_?all|alltoall", re.I)),
    ("broadcast", re.compile(r"broadcast", re.I)),
    ("send_recv", re.compile(r"send|recv|sendrecv", re.I)),
    ("reduce", re.compile(r"reduce", re.I)),
)
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


def collective_kind(name: str) -> str:
    """`all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `broadcast`, `send_recv`, `reduce` from a host
    op (`nccl:all_reduce`, `nccl:_all_gather_base`) or an NCCL kernel (`ncclKernel_AllReduce_*`); the name
    itself where none fits (an expert-parallel kernel)."""
    text = kind_of(name) if is_nccl_kernel(name) else name
    return next((kind for kind, pattern in _HOST_KIND if pattern.search(text)), name)


PARAM_COMMS = "record_param_comms"
"""PyTorch's record of a collective (an operator around the `nccl:*` range): from 2.1 on its arguments say the
message (`In msg nelems`, `dtype`, `Collective name`, `Group size`) whether or not shapes were recorded."""
SCALAR_TYPE_BYTES = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2, "Char": 1, "Byte": 1,
    "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "ComplexFloat": 8, "ComplexDouble": 16,
}  # fmt: skip
"""Bytes per element of PyTorch's ScalarType names, as `record_param_comms` writes its `dtype`."""


def message_bytes(nelems: object, dtype: object) -> int | None:
    """A `record_param_comms` message's bytes; None where its size or type is not known."""
    size = SCALAR_TYPE_BYTES.get(str(dtype))
    if size is None or type(nelems) is not int or nelems < 0:
        return None
    return nelems * size


def payload_bytes(dims: object, types: object) -> int | None:
    """Bytes of an op's tensor inputs from the profiler's `Input Dims` and `Input type`; None where a
    tensor's type or shape is not known (never a guess)."""
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) != len(types):
        return None
    total, seen = 0, False
    for shape, typ in zip(dims, types):
        if not isinstance(shape, list) or not shape:
            continue  # a scalar argument or an empty list (a TensorList the profiler did not expand)
        size = DTYPE_BYTES.get(str(typ))
        if size is None or not all(type(d) is int and d >= 0 for d in shape):
            return None
        count = 1
        for d in shape:
            count *= d
        total += count * size
        seen = True
    return total if seen else None
