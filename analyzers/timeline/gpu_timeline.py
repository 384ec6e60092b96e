"""What the GPU rows of a timeline show, as Nsight Systems' GUI does: each GPU operation by kind on its
(device, stream), and NVTX ranges by nesting depth (an epoch range above its step ranges).

Rules only; the viewer reads the tables with them and draws.
"""

from __future__ import annotations

import numpy as np

from analyzers.trace.tables import KERNELS, MEMSET_KIND

KERNEL, MEMCPY_OP, MEMSET_OP = "kernel", "memcpy", "memset"
GPU_ACTIVITIES = (MEMSET_OP, MEMCPY_OP, KERNEL)  # lowest first: a kernel wins a pixel it shares with a copy
NVTX_ACTIVITIES = ("NVTX range", "NVTX range, next")  # alternate ranges of one row, so neighbours stand apart
MAX_NVTX_DEPTH = 4  # rows of nested NVTX ranges; deeper ones share the last row


def gpu_activity(table: str, kind: str | None) -> str:
    """A kernel, or a memory operation of the memcpy table: a memset (nsys's "[CUDA memset]") or a copy."""
    if table == KERNELS:
        return KERNEL
    return MEMSET_OP if kind == MEMSET_KIND else MEMCPY_OP


def stream_label(device: int, stream: int) -> str:
    return f"GPU {device} stream {stream}"


def nvtx_depth(start_ns: np.ndarray, end_ns: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """Each range's nesting depth among the ranges of its thread (0 = outermost), capped at MAX_NVTX_DEPTH - 1.

    A range is inside another that starts no later and ends no earlier; ranges that merely overlap
    (NVTX start/end ranges may) count as nested in the one that started first.
    """
    depth = np.zeros(len(start_ns), dtype=np.int64)
    order = np.lexsort((-end_ns, start_ns, thread))
    stack: list[int] = []  # ends of the open ranges
    last_thread = None
    for i in order.tolist():
        if thread[i] != last_thread:
            stack, last_thread = [], thread[i]
        while stack and stack[-1] <= start_ns[i]:
            stack.pop()
        depth[i] = min(len(stack), MAX_NVTX_DEPTH - 1)
        stack.append(int(end_ns[i]))
    return depth
