"""NCCL message bytes under nsys: the collectives table of nsys-ai's 2-GPU training export (PyTorch's
`nccl:all_to_all` ranges around NCCL's own `ncclSend`/`ncclRecv`, whose payloads this window does not keep)
says "not recorded"; the same export with payloads in NCCL's schema gives bytes, algbw and busbw equal to
plain SQL sums over its rows."""

from __future__ import annotations

import shutil
import sqlite3
import struct
from pathlib import Path

import pytest

from analyzers.figures import collectives
from analyzers.ingest import nsys_nccl
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder, list_runs

EXPORT = ("nsys-ai", "mfu_2gpu_before.sqlite")
PID = "(globalTid >> 24) & 0xFFFFFF"
SEND_SCHEMA, RECV_SCHEMA = 16777226, 16777225  # the export's schemas of (communicator, message size, peer)


def _imported(export: Path, out: Path) -> RunFolder:
    result = run_tracer("import", str(export), "--out", str(out))
    assert result.returncode == 0, result.stderr
    (folder,) = list_runs(out)
    return folder


def _launched_ops(db: sqlite3.Connection) -> str:
    """SQL: PyTorch's nccl:all_to_all ranges that launched an NCCL kernel (a runtime call on their thread,
    inside them, whose correlation id is an ncclDevKernel's)."""
    return (
        "SELECT o.start, o.\"end\", o.globalTid FROM NVTX_EVENTS o WHERE o.text LIKE 'nccl:all_to_all,%' AND EXISTS ("
        "SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN CUPTI_ACTIVITY_KIND_KERNEL k "
        "ON k.correlationId = r.correlationId AND (k.globalPid >> 24) = (r.globalTid >> 24) "
        "JOIN StringIds s ON s.id = k.shortName "
        'WHERE r.globalTid = o.globalTid AND r.start >= o.start AND r.start <= o."end" '
        "AND s.value LIKE 'ncclDevKernel%')"
    )


def test_nsys_export_without_payloads_says_not_recorded(real_fixtures: Path, tmp_path: Path) -> None:
    export = real_fixtures.joinpath(*EXPORT)
    folder = _imported(export, tmp_path)
    table = collectives.table(folder)
    assert table is not None and table.world_size == 2
    assert table.bytes_from == collectives.BYTES_NOT_RECORDED
    assert all(r.bytes is None and r.algbw_gbps is None and r.busbw_gbps is None for r in table.rows)
    db = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    payloads = db.execute(
        "SELECT count(*), count(n.binaryData) FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
        "WHERE s.value IN ('ncclSend', 'ncclRecv')"
    ).fetchone()
    assert payloads[0] > 0 and payloads[1] == 0  # NCCL's ranges are there, their sizes are not
    # every NCCL kernel is one call and its time, whether a host op launched it or the window cut its op
    per_pid = dict(
        db.execute(
            "SELECT (k.globalPid >> 24) & 0xFFFFFF, count(*) || ' ' || sum(k.\"end\" - k.start) "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
            "WHERE s.value LIKE 'ncclDevKernel%' GROUP BY 1"
        ).fetchall()
    )
    pids = [r.pid for r in folder.read_record().rank_infos]
    for rank, pid in enumerate(pids):
        mine = [r for r in table.rows if r.rank == rank]
        calls, ns = per_pid[pid].split()
        assert sum(r.calls for r in mine) == int(calls)
        assert sum(r.time_s for r in mine) == pytest.approx(int(ns) / 1e9, abs=1e-12)
        launched = db.execute(f"SELECT count(*) FROM ({_launched_ops(db)}) WHERE {PID} = ?", (pid,))
        assert next(r for r in mine if r.kind == "all_to_all").calls == launched.fetchone()[0]


def _with_payloads(export: Path, to: Path) -> Path:
    """A copy of `export` whose NCCL send and receive ranges carry NCCL's payload (communicator, message size,
    peer) behind nsys's 32-byte header: size 4096 x (rowid mod 7 + 1) bytes."""
    shutil.copy(export, to)
    db = sqlite3.connect(to)
    rows = db.execute(
        "SELECT n.rowid, s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
        "WHERE s.value IN ('ncclSend', 'ncclRecv')"
    ).fetchall()
    for rowid, name in rows:
        schema = SEND_SCHEMA if name == "ncclSend" else RECV_SCHEMA
        payload = struct.pack("<QQI4x", 0xC0FFEE, 4096 * (rowid % 7 + 1), 1)
        header = struct.pack("<IIIIQQ", 1, 0, schema, 0, len(payload), 32 + len(payload))
        db.execute("UPDATE NVTX_EVENTS SET binaryData = ? WHERE rowid = ?", (header + payload, rowid))
    db.commit()
    db.close()
    return to


def test_nccl_payload_bytes_give_algbw_and_busbw(real_fixtures: Path, tmp_path: Path) -> None:
    export = _with_payloads(real_fixtures.joinpath(*EXPORT), tmp_path / "payloads.sqlite")
    folder = _imported(export, tmp_path / "runs")
    table = collectives.table(folder)
    assert table is not None and table.bytes_from == collectives.BYTES_FROM_TRACE
    db = sqlite3.connect(export)
    sends = (  # each launched op's sends (receives are the same bytes coming back), sized as written above
        f"SELECT o.globalTid AS g, sum(4096 * (n.rowid % 7 + 1)) AS b FROM ({_launched_ops(db)}) o "
        'JOIN NVTX_EVENTS n ON n.globalTid = o.globalTid AND n.start >= o.start AND n."end" <= o."end" '
        "JOIN StringIds s ON s.id = n.textId WHERE s.value = 'ncclSend' GROUP BY o.globalTid, o.start"
    )
    by_pid = dict(db.execute(f"SELECT (g >> 24) & 0xFFFFFF, sum(b) FROM ({sends}) GROUP BY 1").fetchall())
    pids = [r.pid for r in folder.read_record().rank_infos]
    n = 2
    for rank, pid in enumerate(pids):
        row = next(r for r in table.rows if r.rank == rank and r.kind == "all_to_all")
        assert row.bytes == by_pid[pid]
        assert row.algbw_gbps == pytest.approx(row.bytes / row.time_s / 1e9, rel=1e-12)
        assert row.busbw_gbps == pytest.approx(row.algbw_gbps * (n - 1) / n, rel=1e-12)


def test_payload_size_reads_the_schema_field() -> None:
    fields = {SEND_SCHEMA: (8, 8)}
    payload = struct.pack("<QQI4x", 7, 123_456, 1)
    blob = struct.pack("<IIIIQQ", 1, 0, SEND_SCHEMA, 0, 24, 56) + payload
    assert nsys_nccl.payload_size(blob, fields) == 123_456
    assert nsys_nccl.payload_size(blob.hex(), fields) == 123_456  # DuckDB hands a BLOB over as hex text
    assert nsys_nccl.payload_size(blob[:40], fields) is None  # too short for its schema
    assert nsys_nccl.payload_size(blob, {}) is None  # a schema without a message size
