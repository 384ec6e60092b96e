"""An nsys-jax archive (JAX-Toolbox's wrapper of `nsys profile`: a zip, or the folder it unpacks to)
into the tables, from the output of the `nvtx_gpu_proj_trace` recipe it runs: the NVTX ranges XLA
emits (`XlaModule:#hlo_module=...#` for a compiled program, `Thunk:#hlo_op=...#` for each op) projected
onto the GPU, so each range spans the GPU time of the work it launched.

A thunk is an XLA op as XLA names it (`fusion.12`, `convolution.3`, `all-reduce-start`), so thunks are
the operator table (nested as the recipe's range stack nests them); modules and every other range
are named ranges, as NVTX ranges are. Both layouts the recipe has written are read: `Name`,
`Projected Start`, `Projected Duration`, `PID`, `TID` (nsys 2024.6 on), and `Text`, `Start`, `End`,
`PID`, `TID` (2024.5). Times are ns from the session's start (a relative clock); rows are sorted.
"""

from __future__ import annotations

import re
import tempfile
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.ingest.archives import Budget
from analyzers.ingest.readers import NSYS_JAX_TRACE, Read
from analyzers.trace import tables as t
from analyzers.trace.clock import kineto_clock
from tracer.core.errors import UserError

THUNK = re.compile(r"^(?:TSL:)?Thunk:#(?:name=.*?,|)hlo_op=([^#,]+)#$")
"""A thunk range's name; its op is the group."""
LAYOUTS = (
    ("Name", "Projected Start", "Projected Duration"),  # start and duration
    ("Text", "Start", "End"),  # start and end
)


def read(path: Path) -> Read:
    """The tables of an archive (or its folder) holding the recipe output (`readers.NSYS_JAX_TRACE`, the path
    it ends with, by which the registry tells the format apart)."""
    table = _recipe_table(path)
    names = set(table.column_names)
    layout = next((cols for cols in LAYOUTS if set(cols) | {"PID", "TID"} <= names), None)
    if layout is None:
        raise UserError(
            f"{path}: the nsys-jax recipe output has columns {', '.join(sorted(names))}, not a layout this tracer "
            "reads (Name, Projected Start, Projected Duration, PID, TID)"
        )
    name_col, start_col, third = layout
    table = table.filter(pc.is_valid(table[start_col])).sort_by(start_col)
    names_list = [str(n) for n in table[name_col].to_pylist()]
    start = pc.cast(table[start_col], pa.int64())
    end = (
        pc.add(start, pc.cast(table[third], pa.int64()))
        if third == "Projected Duration"
        else pc.cast(table[third], pa.int64())
    )
    pid = pc.cast(table["PID"], pa.int64())
    tid = pc.cast(table["TID"], pa.int64())
    thunks = [THUNK.match(n) for n in names_list]
    is_op = pa.array([m is not None for m in thunks])
    shown = pa.array([m.group(1) if m else n for m, n in zip(thunks, names_list)], pa.string())
    source = pa.array([t.SOURCE_NSYS_JAX] * len(names_list), pa.string())
    rows = pa.table([start, end, shown, pid, tid, source], schema=t.RANGE_SCHEMA)
    out = {t.OPERATORS: rows.filter(is_op), t.NVTX: rows.filter(pc.invert(is_op))}
    return Read({k: v for k, v in out.items() if v.num_rows}, kineto_clock(None))


def _recipe_table(path: Path) -> pa.Table:
    try:
        if path.is_dir():
            return pq.read_table(path / NSYS_JAX_TRACE)
        with zipfile.ZipFile(path) as z, tempfile.TemporaryFile() as unpacked:
            member = next(i for i in z.infolist() if i.filename.endswith(NSYS_JAX_TRACE))
            budget = Budget(path)  # streamed to a file, never whole in memory, and bounded as it comes
            budget.check_declared(member.filename, member.file_size)
            with z.open(member) as source:
                budget.copy(member.filename, source, unpacked)
            unpacked.seek(0)
            return pq.read_table(unpacked)
    except (OSError, zipfile.BadZipFile, StopIteration, pa.ArrowInvalid) as e:
        raise UserError(f"{path}: cannot read the nsys-jax recipe output {NSYS_JAX_TRACE} ({e})") from None
