"""Sample tables are written in Parquet row groups as they come (issue 29): the tracer holds at most one
row group of rows however long the run, the end needs no conversion, and a crash still leaves the CSV
journal readable."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tracer.core import runfolder, schema
from tracer.core.runfolder import RunFolder


def _row(i: int) -> tuple[object, ...]:
    return (1_000 + i, 1, 100 + i % 7, f"thread-{i % 3}", 0.25 * i, 0.5)


def test_rows_go_out_in_row_groups_as_they_come(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runfolder, "ROW_GROUP_MAX_ROWS", 100)
    folder = RunFolder.create(tmp_path, "run")
    stream = folder.sample_stream(schema.THREADS_TABLE.name)
    held = []
    for i in range(1_000):
        stream.append(_row(i))
        if i % 30 == 29:  # the sampler flushes every half second
            stream.flush()
            held.append(stream._rows)
    assert max(held) < 130, "never more than one row group (plus one flush) of rows in memory"
    assert stream.partial.exists() and not stream.parquet.exists(), "a Parquet in the making is not yet the table"
    stream.close()
    table = pq.ParquetFile(folder.sample_parquet_path(schema.THREADS_TABLE.name))
    assert table.metadata.num_rows == 1_000 and table.metadata.num_row_groups >= 9
    assert table.schema_arrow == schema.THREADS_TABLE.schema
    read = table.read()
    assert read.column("tid").to_pylist()[:3] == [100, 101, 102] and read.column("name")[4].as_py() == "thread-1"
    assert folder.finalise_samples() == []
    assert not folder.sample_stream_path(schema.THREADS_TABLE.name).exists(), "the journal goes once Parquet is there"
    assert folder.samples(schema.THREADS_TABLE.name) == read


def test_a_crash_leaves_the_journal_and_no_half_parquet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runfolder, "ROW_GROUP_MAX_ROWS", 10)
    folder = RunFolder.create(tmp_path, "run")
    stream = folder.sample_stream(schema.PROCESS.name)
    row = (1, 50.0, 1.0, 100.0, 1.0, 12, 1, 40.0, 30.0, 5000.0, 3, 4, 80.0)
    for i in range(25):
        stream.append((i, *row[1:]))
        stream.flush()
    # the tracer dies here: no close; its footerless .partial is not a table
    assert not folder.sample_parquet_path(schema.PROCESS.name).exists()
    table = folder.samples(schema.PROCESS.name)
    assert table is not None and table.num_rows == 25
    # the next reader to finalise converts the journal as before
    assert folder.finalise_samples() == []
    assert pq.read_table(folder.sample_parquet_path(schema.PROCESS.name)).num_rows == 25


def test_rows_arrow_cannot_take_leave_the_csv_path(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "run")
    stream = folder.sample_stream(schema.CORES.name)
    stream.append((1, 0, 12.5))
    stream.append(("not a time", 1, 3.0))  # a bad row: the Parquet side stops, the journal keeps it
    stream.close()
    assert stream.parquet_error and not folder.sample_parquet_path(schema.CORES.name).exists()
    assert folder.sample_stream_path(schema.CORES.name).read_text().count("\n") == 3
