"""Our own CUPTI records (format in `analyzers.trace.tables`' docstring) into the normalised tables.

Batches are read one file at a time; a JSONL line cut short by a crash is skipped, so a worker that
died mid-run still yields what it flushed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from analyzers.trace import tables as t
from analyzers.trace.clock import UNIX_NS, Clock
from analyzers.trace.kernel_names import demangle
from tracer.core.errors import UserError

API_KINDS = {"runtime", "driver"}


def _records(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        try:
            return pq.read_table(path).to_pylist()
        except (OSError, pa.ArrowInvalid) as e:
            raise UserError(f"{path}: unreadable CUPTI batch ({e})") from None
    raise UserError(f"{path}: not a CUPTI batch (expected records-NNNNN.parquet)")


def batch_files(cupti_dir: Path) -> list[Path]:
    return sorted(p for p in cupti_dir.iterdir() if p.suffix == ".parquet" and p.is_file())


def read_dir(cupti_dir: Path) -> tuple[dict[str, pa.Table], Clock]:
    offset = 0
    clock_file = cupti_dir / "clock.json"
    if clock_file.exists():
        try:
            offset = int(json.loads(clock_file.read_text())["offset_ns"])
        except (ValueError, KeyError, TypeError) as e:
            raise UserError(f"{clock_file}: unreadable ({e})") from None
    clock = Clock(offset, UNIX_NS)
    rows: dict[str, list[dict[str, Any]]] = {t.CUDA_API: [], t.KERNELS: [], t.MEMCPY: []}
    for path in batch_files(cupti_dir):
        for r in _records(path):
            kind = r.get("kind")
            try:
                start, end = int(r["start_ns"]) + offset, int(r["end_ns"]) + offset
            except (KeyError, TypeError, ValueError):
                raise UserError(f"{path}: a CUPTI record lacks start_ns/end_ns") from None
            common = {"start_ns": start, "end_ns": end, "dur_ns": end - start, "source": t.SOURCE_CUPTI}
            corr = r.get("correlation_id", -1)
            if kind in API_KINDS:
                name = str(r.get("name", ""))
                rows[t.CUDA_API].append(
                    common
                    | {
                        "name": name,
                        "api": t.api_display_name(name),
                        "kind": kind,
                        "pid": r.get("pid"),
                        "tid": r.get("tid"),
                        "thread_name": r.get("thread_name", ""),
                        "correlation_id": corr,
                    }
                )
            elif kind == "kernel":
                rows[t.KERNELS].append(
                    common
                    | {k: r.get(k) for k in t.KERNELS_SCHEMA.names if k not in common}
                    | {"name": demangle(str(r.get("name", ""))), "short_name": r.get("short_name", r.get("name"))}
                )
            elif kind in ("memcpy", "memset"):
                label = t.MEMSET_KIND if kind == "memset" else t.memcpy_kind_label(str(r.get("name", "Unknown")))
                rows[t.MEMCPY].append(
                    common
                    | {
                        "kind": label,
                        "bytes": r.get("bytes", 0),
                        "device": r.get("device"),
                        "stream": r.get("stream"),
                        "correlation_id": corr,
                    }
                )
    out = {
        name: pa.Table.from_pylist(recs, schema=t.SCHEMAS[name]).sort_by("start_ns")
        for name, recs in rows.items()
        if recs
    }
    return out, clock
