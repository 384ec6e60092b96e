"""rocprof's rocpd SQLite database (`.rpd`, ROCm's rocmProfileData schema) into the tables.

The schema (rocmProfileData's `rocpd_*` tables): `rocpd_string(id, string)`; `rocpd_api(id, pid, tid,
start, end, apiName_id, args_id, ...)`, the HIP (and HSA, roctx) calls; `rocpd_op(id, gpuId, queueId,
start, end, description_id, opType_id, ...)`, what ran on a GPU: `KernelExecution` ops (the
description is the kernel's name; `Task` for a kernel a graph launched), copies (`CopyHostToDevice`,
`CopyDeviceToHost`, ...) and fills;
`rocpd_api_ops(api_id, op_id)` ties a call to the work it launched (the correlation id here), and
`rocpd_copyapi(api_ptr_id, size, ...)` gives a copy's bytes. Times are ns on the profiler's clock,
kept relative. The calls keep their HIP names (`hipLaunchKernel`), so every table and figure says HIP
(`analyzers.trace.tables.api_family`). Rows are read in time order.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pyarrow as pa

from analyzers.ingest.readers import Read
from analyzers.trace import tables as t
from analyzers.trace.clock import kineto_clock
from tracer.core.errors import UserError

KERNEL_OPS = ("KernelExecution", "Task")
"""Ops that are kernels: those a launch dispatched, and `Task`, the kernels a graph ran (`hipGraphLaunch`:
roctracer's HIP_OP_DISPATCH_KIND_TASK, named by its kernel as a dispatch is; 22 % of the kernel time of
rocmProfileData's own test trace)."""
COPY_OPS = {
    "CopyHostToDevice": "Host-to-Device",
    "CopyDeviceToHost": "Device-to-Host",
    "CopyDeviceToDevice": "Device-to-Device",
    "CopyHostToHost": "Host-to-Host",
    "CopyPeerToPeer": "Peer-to-Peer",
}
FILL_OPS = ("FillBuffer", "MemsetAsync", "Memset")
MARKER_API = "UserMarker"
"""roctx ranges (`roctxRangePush`) as rocpd records them: a call named so, its text in `args`."""
_DRIVER = re.compile(r"^hsa_")


def read(path: Path) -> Read:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as e:
        raise UserError(f"{path}: cannot open the rocpd database ({e})") from None
    try:
        return Read(_read(con), kineto_clock(None))
    except sqlite3.Error as e:
        raise UserError(f"{path}: damaged rocpd database ({e})") from None
    except (TypeError, ValueError, OverflowError, pa.ArrowException) as e:  # NULL, text or huge times, binary names
        raise UserError(
            f"{path}: damaged rocpd database (a value of the wrong type or range: {str(e)[:160]})"
        ) from None
    finally:
        con.close()


def _read(con: sqlite3.Connection) -> dict[str, pa.Table]:
    strings = dict(con.execute("SELECT id, string FROM rocpd_string"))
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    link = dict(con.execute("SELECT op_id, api_id FROM rocpd_api_ops")) if "rocpd_api_ops" in tables else {}
    sizes = dict(con.execute("SELECT api_ptr_id, size FROM rocpd_copyapi")) if "rocpd_copyapi" in tables else {}
    api: list[tuple] = []
    ranges: list[tuple] = []
    args_text = "args_id" in {r[1] for r in con.execute("PRAGMA table_info(rocpd_api)")}
    select = 'SELECT id, pid, tid, start, "end", apiName_id' + (", args_id" if args_text else ", 0")
    for api_id, pid, tid, start, end, name_id, args_id in con.execute(select + " FROM rocpd_api ORDER BY start, id"):
        name = strings.get(name_id, f"<name {name_id}>")
        if name == MARKER_API:
            ranges.append((start, end, strings.get(args_id, name), pid, tid, t.SOURCE_ROCPD))
            continue
        kind = t.API_DRIVER if _DRIVER.match(name) else t.API_RUNTIME
        api.append(
            (start, end, end - start, name, t.api_display_name(name), kind, pid, tid, "", api_id, t.SOURCE_ROCPD)
        )
    kernels: list[tuple] = []
    copies: list[tuple] = []
    ops = 'SELECT id, gpuId, queueId, start, "end", description_id, opType_id FROM rocpd_op ORDER BY start, id'
    for op_id, gpu, queue, start, end, description_id, type_id in con.execute(ops):
        op_type = strings.get(type_id, "")
        api_id = link.get(op_id, -1)
        if op_type in KERNEL_OPS:
            name = strings.get(description_id, "") or op_type
            kernels.append(
                (start, end, end - start, name, name, gpu, queue, api_id, -1) + (None,) * 6 + (t.SOURCE_ROCPD,)
            )
        elif op_type in COPY_OPS or op_type.startswith(FILL_OPS):
            kind = t.memcpy_kind_label(COPY_OPS[op_type]) if op_type in COPY_OPS else t.MEMSET_KIND
            copies.append(
                (start, end, end - start, kind, int(sizes.get(api_id, 0) or 0), gpu, queue, api_id, t.SOURCE_ROCPD)
            )
    out = {
        t.CUDA_API: _table(api, t.CUDA_API_SCHEMA),
        t.KERNELS: _table(kernels, t.KERNELS_SCHEMA),
        t.MEMCPY: _table(copies, t.MEMCPY_SCHEMA),
        t.NVTX: _table(ranges, t.NVTX_SCHEMA),
    }
    return {k: v for k, v in out.items() if v.num_rows}


def _table(rows: list[tuple], schema: pa.Schema) -> pa.Table:
    columns = list(zip(*rows)) if rows else [()] * len(schema)
    return pa.table([pa.array(list(c), f.type) for c, f in zip(columns, schema)], schema=schema)
