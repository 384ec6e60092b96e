"""GPU-side summaries: kernels as `nsys stats --report cuda_gpu_kern_sum`, memory operations as
`cuda_gpu_mem_time_sum`, and GPU busy/idle time.

Kernel rows group by the demangled (templated) name, nsys's default (CUPTI's mangled symbols are
demangled here, so old CUPTI run folders read like new ones); each row carries the label tables and
the viewer show (`analyzers.trace.kernel_names`). Busy time is the union of
kernel and memcpy/memset intervals per device (overlapping streams count once); idle is the rest
of the span from the first to the last GPU activity on that device, summed over devices.
"""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq

from analyzers.run.run import Run
from analyzers.summaries.cuda_api import summarise_durations
from analyzers.summaries.rows import KernelRow, MemcpyRow
from analyzers.trace import kernel_classes, kernel_names
from analyzers.trace import tables as t


def kernel_summary(folder: Run, start_ns: int | None = None, end_ns: int | None = None) -> list[KernelRow]:
    if not t.present(folder, t.KERNELS):  # absent, or damaged (named in the run's problems)
        return []
    rows = summarise_durations(folder.table_file(t.KERNELS), "name", "name", start_ns, end_ns)
    labels = kernel_names.short_names(r[0] for r in rows)
    classes = kernel_classes.classify_distinct([r[0] for r in rows])
    return [
        KernelRow(kernel_names.demangle(r[0]), *r[1:], short_name=labels[r[0]], kernel_class=c)
        for r, c in zip(rows, classes)
    ]


def memcpy_summary(folder: Run, start_ns: int | None = None, end_ns: int | None = None) -> list[MemcpyRow]:
    if not t.present(folder, t.MEMCPY):  # absent, or damaged (named in the run's problems)
        return []
    rows = summarise_durations(folder.table_file(t.MEMCPY), "kind", "kind", start_ns, end_ns)
    return [MemcpyRow(*r) for r in rows]


def union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length of the union of [start, end) intervals."""
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    # A new block starts where an interval begins after everything before it has ended.
    new_block = np.empty(len(s), dtype=bool)
    new_block[0] = True
    new_block[1:] = s[1:] > reach[:-1]
    block_id = np.cumsum(new_block) - 1
    block_start = s[new_block]
    block_end = np.zeros(block_id[-1] + 1, dtype=np.int64)
    np.maximum.at(block_end, block_id, e)
    return int((block_end - block_start).sum())


def gpu_busy(folder: Run) -> tuple[int, int]:
    """(busy_ns, idle_ns) summed over devices; (0, 0) without GPU activity."""
    per_device: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for name in (t.KERNELS, t.MEMCPY):
        path = folder.table_file(name)
        if not t.present(folder, name):
            continue
        table = pq.read_table(path, columns=["start_ns", "end_ns", "device"])
        dev = table["device"].fill_null(0).to_numpy()
        s = table["start_ns"].to_numpy()
        e = table["end_ns"].to_numpy()
        for d in np.unique(dev):
            mask = dev == d
            per_device.setdefault(int(d), []).append((s[mask], e[mask]))
    busy = idle = 0
    for parts in per_device.values():
        s = np.concatenate([p[0] for p in parts])
        e = np.concatenate([p[1] for p in parts])
        if len(s) == 0:
            continue
        b = union_ns(s, e)
        busy += b
        idle += int(e.max() - s.min()) - b
    return busy, idle
