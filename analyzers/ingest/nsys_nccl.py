"""An nsys export's host collectives with their message bytes, from NCCL's own NVTX ranges, as the
`comm_ops` table a Kineto import writes: so the collectives table gives nsys traces bytes, algorithm and
bus bandwidth where the trace holds the size, and says "not recorded" where it does not.

- NCCL (2.x with NVTX) marks each API call with a range in its own domain (`ncclAllReduce`, `ncclSend`,
  `ncclGroupStart` ...). NCCL 2.19 and later attach a typed payload: the schema (`NVTX_PAYLOAD_SCHEMAS`,
  `NVTX_PAYLOAD_SCHEMA_ENTRIES`) names its fields, one of them `Message size [bytes]`; the values are in the
  event's `binaryData` behind a 32-byte header whose bytes 8..11 are the schema id (the layout nsys-ai
  decodes from Nsight Systems 2026 exports). An export without `binaryData` values (nsys-ai's 2-GPU
  windows: ranges kept, payloads not) gives calls with no size.
- The host op: PyTorch's own `nccl:*` range where the trace has them (`emit_nvtx`: "nccl:all_to_all,
  op_id = 991144"), which holds every NCCL call of the collective and the group end that launches its
  kernel; else each NCCL collective call, and each `ncclGroupStart`..`ncclGroupEnd` span as one op.
- Its bytes: the sum of the message sizes of the NCCL calls inside it on its thread, receives left out (an
  all-to-all's sends to every rank are its send buffer, the size nccl-tests counts); None where one of them
  carries no size.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from analyzers.ingest import nsys_export as ex
from analyzers.trace import collectives as coll
from analyzers.trace import tables as t

SCHEMAS, ENTRIES = "NVTX_PAYLOAD_SCHEMAS", "NVTX_PAYLOAD_SCHEMA_ENTRIES"
MESSAGE_SIZE = "Message size [bytes]"
"""The payload field NCCL fills with a call's message size."""
HEADER = struct.Struct("<IIIIQQ")
"""An NVTX payload's header in `binaryData`: domain, flags, schema id, flags, payload size, total size."""
ENTRY_BYTES = {5: 4, 18: 8, 22: 8}
"""Bytes of the NVTX payload entry types NCCL uses: uint32 (ranks, peer), uint64 (communicator), size_t."""
GROUP_START, GROUP_END = "ncclGroupStart", "ncclGroupEnd"
_NCCL_CALL = re.compile(r"^nccl[A-Z]")
_RECEIVE = re.compile(r"Recv$")
_NOT_A_CALL = ("ncclCommCount", "ncclCommInitRank", "ncclCommSplit", "ncclCommDestroy", "ncclCommAbort")


@dataclass(frozen=True)
class _Range:
    start: int
    end: int
    gtid: int
    name: str
    size: int | None  # the message size its payload gives, None without one


def _size_fields(db: ex.Export, names: set[str]) -> dict[int, tuple[int, int]]:
    """schema id -> (offset, bytes) of its `Message size [bytes]` entry."""
    if SCHEMAS not in names or ENTRIES not in names:
        return {}
    rows = db.rows(f'SELECT DISTINCT schemaId, "type", "offset" FROM {ENTRIES} WHERE name = \'{MESSAGE_SIZE}\'')
    return {int(s): (int(off or 0), ENTRY_BYTES[int(ty)]) for s, ty, off in rows if int(ty) in ENTRY_BYTES}


def payload_size(blob: Any, fields: dict[int, tuple[int, int]]) -> int | None:
    """The message size in one event's `binaryData` (bytes, or hex text as DuckDB gives a BLOB); None where
    it has none or is too short for its schema."""
    if blob is None:
        return None
    if isinstance(blob, str):
        try:
            blob = bytes.fromhex(blob)
        except ValueError:
            return None
    data = bytes(blob)
    if len(data) < HEADER.size:
        return None
    schema_id = HEADER.unpack_from(data)[2]
    field = fields.get(schema_id)
    if field is None or len(data) < HEADER.size + field[0] + field[1]:
        return None
    return int.from_bytes(data[HEADER.size + field[0] : HEADER.size + field[0] + field[1]], "little")


def _ranges(db: ex.Export, names: set[str]) -> tuple[list[_Range], list[_Range]]:
    """(PyTorch's `nccl:*` ranges, NCCL's own API ranges), by start."""
    cols = db.columns(ex.NVTX)
    name = "coalesce(n.text, s.value)" if "textId" in cols else "n.text"
    join = "LEFT JOIN StringIds s ON s.id = n.textId" if "textId" in cols else ""
    blob = "n.binaryData" if "binaryData" in cols else "NULL"
    rows = db.rows(
        f'SELECT n.start, n."end", n.globalTid, {name} AS label, {blob} FROM {ex.NVTX} n {join} '
        f"WHERE n.\"end\" IS NOT NULL AND (label LIKE 'nccl%' OR label LIKE 'gloo:%') ORDER BY n.start"
    )
    fields = _size_fields(db, names)
    torch, nccl = [], []
    for start, end, gtid, label, data in rows:
        text = str(label)
        head = text.split(",", 1)[0]
        if coll.is_host_collective(head):
            torch.append(_Range(int(start), int(end), int(gtid or 0), head, None))
        elif _NCCL_CALL.match(text) and text not in _NOT_A_CALL:
            nccl.append(_Range(int(start), int(end), int(gtid or 0), text, payload_size(data, fields)))
    return torch, nccl


def _bytes(calls: Iterable[_Range]) -> int | None:
    sized = [c for c in calls if c.name not in (GROUP_START, GROUP_END) and not _RECEIVE.search(c.name)]
    if not sized or any(c.size is None for c in sized):
        return None
    return sum(c.size or 0 for c in sized)


def host_ops(torch: list[_Range], nccl: list[_Range]) -> list[tuple[int, int, str, int, int | None]]:
    """(start, end, name, globalTid, bytes) of each host collective."""
    if torch:
        by_thread: dict[int, list[_Range]] = {}
        for c in nccl:
            by_thread.setdefault(c.gtid, []).append(c)
        return [
            (op.start, op.end, op.name, op.gtid,
             _bytes(c for c in by_thread.get(op.gtid, ()) if op.start <= c.start and c.end <= op.end))
            for op in torch
        ]  # fmt: skip
    out: list[tuple[int, int, str, int, int | None]] = []
    open_groups: dict[int, list[_Range]] = {}
    for c in nccl:
        group = open_groups.get(c.gtid)
        if c.name == GROUP_START and group is None:
            open_groups[c.gtid] = [c]
        elif group is not None:
            group.append(c)
            if c.name == GROUP_END:
                del open_groups[c.gtid]
                members = [m for m in group if m.name not in (GROUP_START, GROUP_END)]
                if members:
                    kinds = {coll.collective_kind(m.name) for m in members}
                    kind = kinds.pop() if len(kinds) == 1 else "send_recv"
                    out.append((group[0].start, c.end, f"nccl:{kind}", c.gtid, _bytes(members)))
        elif c.name not in (GROUP_START, GROUP_END):
            out.append((c.start, c.end, f"nccl:{coll.collective_kind(c.name)}", c.gtid, _bytes([c])))
    return sorted(out)


def write(db: ex.Export, names: set[str], offset_ns: int, out: Path) -> int:
    """The `comm_ops` table at `out` (rows written; no file where the trace has no NCCL ranges)."""
    if ex.NVTX not in names:
        return 0
    torch, nccl = _ranges(db, names)
    if not nccl:
        return 0  # no NCCL ranges: nothing says which host ranges launched the collectives' kernels
    ops = host_ops(torch, nccl)
    if not ops:
        return 0
    gtids = [op[3] for op in ops]
    table = pa.table(
        {
            "start_ns": pa.array([op[0] + offset_ns for op in ops], pa.int64()),
            "end_ns": pa.array([op[1] + offset_ns for op in ops], pa.int64()),
            "name": pa.array([op[2] for op in ops], pa.string()),
            "pid": pa.array([(g >> ex.GTID_BITS) & ex.GTID_MASK for g in gtids], pa.int64()),
            "tid": pa.array([g & ex.GTID_MASK for g in gtids], pa.int64()),
            "bytes": pa.array([op[4] for op in ops], pa.int64()),
            "source": pa.array([t.SOURCE_NSYS] * len(ops), pa.string()),
        }
    )
    pq.write_table(table, out)
    return table.num_rows
