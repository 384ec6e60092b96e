"""Which CUDA API call launched which GPU operation: the correlation id both records carry.

One rule for the viewer's hover links and `export-trace`'s flow events. Correlation ids are unique per
process, not per trace (two processes of one nsys report reuse them), so a kernel that names a traced
process is matched on (pid, correlation id); a memory operation (its table has no pid) takes the pid
of the one process whose kernels ran on its device. Kineto writes its device pid (0) on kernels; what has
no host pid matches on the correlation id alone, and only where exactly one API call holds it (an
ambiguous id links nothing rather than the wrong call). A launch never starts after what it launched:
such a pair (an id reused by a process whose call the trace missed) is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.trace.tables import CUDA_API, KERNELS, MEMCPY, present
from tracer.core.runfolder import RunFolder

GPU_TABLES = (KERNELS, MEMCPY)  # the tables of GPU operations that an API call launches
CORRELATION = "correlation_id"


@dataclass(frozen=True)
class Links:
    """Row numbers of linked pairs: `api_row[i]` in cuda_api.parquet launched `gpu_row[i]` in the GPU table."""

    api_row: np.ndarray
    gpu_row: np.ndarray

    def __len__(self) -> int:
        return int(self.api_row.shape[0])


def int_column(path: str | Path | pa.Buffer, column: str) -> np.ndarray:
    """One int64 column of a Parquet file (a run's `table_file`), nulls as -1; viewed from Arrow's buffers
    (pyarrow's to_numpy imports pandas)."""
    with pq.ParquetFile(path, memory_map=True) as file:
        values = file.read(columns=[column]).column(column)
    if values.null_count:
        values = pc.fill_null(values, -1)
    parts = [
        np.frombuffer(c.buffers()[1], dtype=np.int64, count=len(c), offset=c.offset * 8)
        for c in values.cast(pa.int64()).chunks
    ]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def match(
    api_pid: np.ndarray,
    api_corr: np.ndarray,
    api_start: np.ndarray,
    gpu_corr: np.ndarray,
    gpu_pid: np.ndarray | None,
    gpu_start: np.ndarray,
) -> Links:
    """Pairs by the rule above, sorted by GPU row; unmatched rows are left out."""
    host_pids = np.unique(api_pid)
    by_pid = np.zeros(len(gpu_corr), dtype=bool) if gpu_pid is None else np.isin(gpu_pid, host_pids)
    api_rows, gpu_rows = [], []
    if by_pid.any():
        assert gpu_pid is not None
        api_key = api_pid * (1 << 32) + api_corr
        order = np.argsort(api_key, kind="stable")
        gpu_key = gpu_pid[by_pid] * (1 << 32) + gpu_corr[by_pid]
        found, rows = _lookup(api_key[order], gpu_key)
        api_rows.append(order[rows[found]])
        gpu_rows.append(np.flatnonzero(by_pid)[found])
    if (~by_pid).any():
        ids, counts = np.unique(api_corr, return_counts=True)
        unique_ids = ids[counts == 1]
        order = np.argsort(api_corr, kind="stable")
        keep = np.isin(api_corr[order], unique_ids)
        found, rows = _lookup(api_corr[order][keep], gpu_corr[~by_pid])
        api_rows.append(order[keep][rows[found]])
        gpu_rows.append(np.flatnonzero(~by_pid)[found])
    if not api_rows:
        empty = np.zeros(0, dtype=np.int64)
        return Links(empty, empty)
    api, gpu = np.concatenate(api_rows), np.concatenate(gpu_rows)
    causal = api_start[api] <= gpu_start[gpu]
    api, gpu = api[causal], gpu[causal]
    order = np.argsort(gpu, kind="stable")
    return Links(api[order], gpu[order])


def _lookup(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each key: whether `sorted_keys` holds it, and where."""
    if not len(sorted_keys):
        return np.zeros(len(keys), dtype=bool), np.zeros(len(keys), dtype=np.int64)
    pos = np.searchsorted(sorted_keys, keys).clip(0, len(sorted_keys) - 1)
    return sorted_keys[pos] == keys, pos


def launch_links(folder: RunFolder, table: str) -> Links:
    """The API call behind each row of `table` (one of `GPU_TABLES`) that has one."""
    api_path, gpu_path = folder.table_file(CUDA_API), folder.table_file(table)
    if not present(folder, CUDA_API) or not present(folder, table):
        empty = np.zeros(0, dtype=np.int64)
        return Links(empty, empty)
    api_pid = int_column(api_path, "pid")
    gpu_pid = None
    if "pid" in pq.read_schema(gpu_path).names:
        gpu_pid = int_column(gpu_path, "pid")
    elif present(folder, KERNELS):
        gpu_pid = _pid_by_device(folder, api_pid, int_column(gpu_path, "device"))
    return match(
        api_pid,
        int_column(api_path, CORRELATION),
        int_column(api_path, "start_ns"),
        int_column(gpu_path, CORRELATION),
        gpu_pid,
        int_column(gpu_path, "start_ns"),
    )


def _pid_by_device(folder: RunFolder, api_pid: np.ndarray, device: np.ndarray) -> np.ndarray | None:
    """Each row's host pid from its device, where one traced process ran every kernel of that device."""
    path = folder.table_file(KERNELS)
    k_pid, k_dev = int_column(path, "pid"), int_column(path, "device")
    host = np.isin(k_pid, np.unique(api_pid))
    if not host.any():
        return None
    pairs = np.unique(np.stack([k_dev[host], k_pid[host]]), axis=1)
    devices, counts = np.unique(pairs[0], return_counts=True)
    owned = pairs[:, np.isin(pairs[0], devices[counts == 1])]
    out = np.full(len(device), -1, dtype=np.int64)
    for dev, pid in owned.T:
        out[device == dev] = pid
    return out
