"""A long traced run made from a real one: the H100 nsys run folder (AlexNet, SimpleBig, batch 100, two
epochs, about 110 k trace rows) laid end to end until its CUDA API, kernel, copy, NVTX and OS-runtime
tables hold the number of events asked for, as a run of that many epochs would.

Each copy is shifted by the run's length; epochs, NVTX epoch ranges and correlation ids are renumbered
so that phases, epoch lists and launch links stay what they are in one copy; the samples are tiled the
same way and the thread timeline is written as the ingest writes it (not the view: what stores it is
under test). Used by benchmarks/bench_viewer.py and by the view-store tests (on fewer events).

    python tests/analyzers/run_replica.py OUT --events 10000000
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.ingest import threads
from analyzers.trace import tables as t
from tests.real_fixtures import REAL_FIXTURES
from tracer.core.runfolder import RunFolder

SOURCE_RUN = "gpu-h100/20261125-001043-pytorch-alexnet-big-gpu-b100-cf98"
TRACE_TABLES = (t.CUDA_API, t.KERNELS, t.MEMCPY, t.NVTX, t.OSRT)
TIME_COLUMNS = ("start_ns", "end_ns", "t_ns")
EPOCH_NAME = re.compile(r"^epoch (\d+)$")
ROW_GROUP = 1 << 20


def default_source() -> Path:
    return REAL_FIXTURES / SOURCE_RUN


def trace_events(folder: Path) -> int:
    """Rows in the folder's trace tables (what the viewer's trace lanes draw besides the thread timeline)."""
    return sum(
        pq.read_metadata(folder / f"{name}.parquet").num_rows
        for name in TRACE_TABLES
        if (folder / f"{name}.parquet").exists()
    )


def replicate_run(out: Path, events: int, source: Path | None = None) -> Path:
    """A run folder under `out` whose trace tables hold at least `events` rows; returns its path."""
    src = RunFolder(source or default_source())
    if not src.path.is_dir():
        raise SystemExit(f"{src.path} is missing: the H100 fixtures live in tests/data/fixtures")
    copies = max(1, math.ceil(events / trace_events(src.path)))
    record = src.read_record()
    period = record.wall_end_ns - record.wall_start_ns
    epochs = record.spec.epochs
    folder = RunFolder.create(out, f"{src.path.name}-x{copies}")
    _tile_events(src, folder, copies, period, epochs)
    for name in TRACE_TABLES:
        path = src.table_path(name)
        if path.exists():
            _tile_table(pq.read_table(path), folder.table_path(name), copies, period, epochs)
    folder.samples_dir.mkdir(parents=True, exist_ok=True)
    for path in src.samples_dir.glob("*.parquet"):
        _tile_table(pq.read_table(path), folder.samples_dir / path.name, copies, period, epochs)
    shutil.copy(src.path / "trace_meta.json", folder.path / "trace_meta.json")
    spec = dataclasses.replace(record.spec, epochs=epochs * copies)
    folder.write_record(dataclasses.replace(record.with_spec(spec), wall_end_ns=record.wall_start_ns + copies * period))
    threads.write(folder)
    return folder.path


def _tile_events(src: RunFolder, folder: RunFolder, copies: int, period: int, epochs: int) -> None:
    """Start-up events once, epoch and progress events per copy, the end event once at the end."""
    events = src.events()
    with folder.events_path.open("w") as f:
        for k in range(copies):
            for event in events:
                once = "epoch" not in event
                if once and (k if event.get("kind") != "end" else k < copies - 1):
                    continue
                shifted = dict(event, t_ns=int(event["t_ns"]) + k * period)
                if not once:
                    shifted["epoch"] = int(event["epoch"]) + k * epochs
                f.write(json.dumps(shifted) + "\n")


def _tile_table(table: pa.Table, path: Path, copies: int, period: int, epochs: int) -> None:
    """`copies` copies of the table, each shifted by `period` ns, written in row groups as they come."""
    with pq.ParquetWriter(path, table.schema) as writer:
        for k in range(copies):
            part = table
            for column in TIME_COLUMNS:
                if column in part.column_names:
                    shifted = pc.add(part.column(column), pa.scalar(k * period, pa.int64()))
                    part = part.set_column(part.column_names.index(column), column, shifted)
            if "correlation_id" in part.column_names:
                ids = pc.add(part.column("correlation_id"), pa.scalar(k * (1 << 32), pa.int64()))
                part = part.set_column(part.column_names.index("correlation_id"), "correlation_id", ids)
            if "epoch" in part.column_names:
                shifted = pc.add(part.column("epoch"), pa.scalar(k * epochs, pa.int64()))
                part = part.set_column(part.column_names.index("epoch"), "epoch", shifted)
            if path.stem == t.NVTX and k:
                names = [_renumbered(n, k * epochs) for n in part.column("name").to_pylist()]
                part = part.set_column(part.column_names.index("name"), "name", pa.array(names, pa.string()))
            writer.write_table(part, row_group_size=ROW_GROUP)


def _renumbered(name: str | None, offset: int) -> str | None:
    match = EPOCH_NAME.match(name or "")
    return f"epoch {int(match.group(1)) + offset}" if match else name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--events", type=int, default=10_000_000)
    args = parser.parse_args()
    path = replicate_run(args.out, args.events)
    print(f"{path}: {trace_events(path):,} trace events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
