"""The Kineto ingest's two readers give the same tables: pieces read by Arrow's C++ JSON reader in whole
columns, and events read one by one with msgspec (the fallback for a piece Arrow refuses), on every real
Chrome-trace fixture and on a generated trace with the awkward cases (string and unsigned 64-bit ids,
B/E pairs, paddle's timed names, 2021 categories, 16-17 digit times, more than 3 decimals)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from analyzers.ingest import kineto
from analyzers.trace import tables as t

FIXTURES = [
    "kineto-h100/resnet50_bs100_train_torch2.11.json.gz",
    "kineto-2021/worker0.1623143089861.pt.trace.json.gz",
    *(f"param-dlrm-8rank/worker{r}_step_12.*.pt.trace.json.gz" for r in range(8)),
    "hta/benchmark_result_2869224_1695835535_trace.json.gz",
    "hta/nccl_data.json.gz",
    "hta/triton_example.json.gz",
]
READ_BY_MSGSPEC = {"hta/triton_example.json.gz"}
"""Fixtures Arrow refuses whole: Triton's launch events write `grid` as a string, the reader wants a list."""


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, int, int]:
    """(Arrow path's result, msgspec path's result, pieces Arrow took, events read one by one) of
    `parse_with_header`."""
    taken, one_by_one = [], []
    real, real_event = kineto._piece_rows, kineto._Reader.event

    def counted(events: Any) -> Any:
        rows = real(events)
        taken.append(rows is not None)
        return rows

    def event(self: Any, ev: Any) -> None:
        one_by_one.append(1)
        real_event(self, ev)

    with monkeypatch.context() as m:
        m.setattr(kineto, "_piece_rows", counted)
        m.setattr(kineto._Reader, "event", event)
        fast = kineto.parse_with_header(path)
    with monkeypatch.context() as m:
        m.setattr(kineto, "arrow_piece", lambda piece: None)
        slow = kineto.parse_with_header(path)
    return fast, slow, sum(taken), len(one_by_one)


def _assert_equal(fast: Any, slow: Any) -> None:
    tables, clock, batch, header = fast
    assert (clock, batch, header) == slow[1:]
    assert list(tables) == list(slow[0])
    for name, table in tables.items():
        assert table.schema == slow[0][name].schema, name
        for column in table.column_names:
            assert table[column].equals(slow[0][name][column]), (name, column)


@pytest.mark.parametrize("pattern", FIXTURES)
def test_arrow_and_msgspec_read_each_fixture_alike(
    pattern: str, real_fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kineto, "ARROW_CHUNK_BYTES", 256 << 10)  # several pieces even in the small files
    (path,) = real_fixtures.glob(pattern)
    fast, slow, taken, _one_by_one = _both(path, monkeypatch)
    _assert_equal(fast, slow)
    assert (taken == 0) == (pattern in READ_BY_MSGSPEC)  # the Arrow path ran, not the fallback alone
    assert sum(table.num_rows for table in fast[0].values()) > 0


def _awkward_events() -> list[dict[str, Any]]:
    """One of each case the Arrow path must read as the msgspec one does, or hand back to it."""
    base = 4544699557751.704  # 16 significant digits: a double's neighbour is not the same ns
    ev: list[dict[str, Any]] = []
    for i in range(40):
        ts = round(base + 10 * i, 3)
        ev += [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::conv2d",
                "pid": 410,
                "tid": 457,
                "ts": ts,
                "dur": 5.5,
                "args": {"External id": i, "Input Dims": [[100 + i, 3, 224, 224], [64, 3, 7, 7], [], []]},
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::add_",
                "pid": 410,
                "tid": 457,
                "ts": ts,
                "dur": 5.5,
                "args": {"External id": 1000 + i},
            },  # same start and length: ordered by External id
            {"ph": "X", "cat": "cpu_op", "name": "no dur", "pid": 410, "tid": 457, "ts": ts + 1},
            {
                "ph": "X",
                "cat": "Operator",
                "name": "old op",
                "pid": 410,
                "tid": "457",
                "ts": int(ts) + 2,
                "dur": 1,
                "args": {"external id": i},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 410,
                "tid": 457,
                "ts": ts + 0.001,
                "dur": 3.25,
                "args": {"correlation": 7 + i, "cbid": 211},
            },
            {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 410, "tid": 458, "ts": ts, "dur": 1},
            {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 410, "tid": "stream 7", "ts": ts, "dur": 2},
            {
                "ph": "X",
                "cat": "kernel",
                "name": "void k<1>()",
                "pid": 0,
                "tid": 7,
                "ts": 17179869184.125 + i,
                "dur": 0.5,
                "args": {"device": 0, "stream": 7, "correlation": 7 + i, "grid": [4, 1, 1], "block": [128, 1, 1]},
            },
            {
                "ph": "X",
                "cat": "Kernel",
                "name": "old k",
                "pid": 0,
                "tid": "stream 7",
                "ts": 100 + i,
                "dur": 2,
                "args": {"grid": [], "block": [None, 2, 3]},
            },
            {"ph": "X", "cat": "kernel", "name": "k no args", "pid": "0", "tid": 7, "ts": 200 + i, "dur": 2},
            {
                "ph": "X",
                "cat": "gpu_memcpy",
                "name": "Memcpy HtoD (Pageable -> Device)",
                "pid": 0,
                "tid": 7,
                "ts": 300.5 + i,
                "dur": 1,
                "args": {"bytes": 4096, "device": 0, "stream": 7, "correlation": 3},
            },
            {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 301 + i, "dur": 1},
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "pid": 410,
                "tid": 457,
                "ts": ts - 1,
                "dur": 100,
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "conv2d dygraph[31.950 us]",
                "pid": 410,
                "tid": 457,
                "ts": ts + 3,
                "dur": 31.95,
            },  # paddle.profiler's own duration after the name
            {"ph": "f", "id": i, "pid": 410, "tid": 457, "ts": ts, "cat": "ac2g", "name": "ac2g", "bp": "e"},
            {"ph": "M", "name": "thread_name", "pid": 410, "tid": 457, "args": {"name": "thread 457 (python)"}},
            {
                "ph": "i",
                "name": "Iteration Start: PyTorch Profiler",
                "pid": "Traces",
                "tid": "PyTorch Profiler",
                "ts": ts,
                "s": "g",
            },
            {
                "ph": "X",
                "cat": "Trace",
                "name": "PyTorch Profiler (0)",
                "pid": "Spans",
                "tid": "PyTorch Profiler",
                "ts": ts,
                "dur": 9,
            },
        ]
        if i % 7 == 3:  # a time with 4 decimals (rounded half to even): Arrow refuses its piece
            ev.append(
                {"ph": "X", "cat": "cpu_op", "name": "four", "pid": 410, "tid": 457, "ts": ts + 0.0005, "dur": 0.0025}
            )
        if i % 9 == 4:  # a string pid of digits, and a negative tid with a string pid
            ev.append(
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaFree", "pid": "410", "tid": -3, "ts": ts, "dur": 1}
            )
    return ev


def _mxnet_events() -> list[dict[str, Any]]:
    """MXNet's profiler: operators as B/E pairs, thread ids unsigned 64-bit hashes."""
    tid = 2**64 - 12345
    ev: list[dict[str, Any]] = []
    for i in range(30):
        ev += [
            {"ph": "B", "cat": "operator", "name": "Convolution", "pid": 0, "tid": tid, "ts": 1000 * i},
            {"ph": "E", "cat": "operator", "name": "Convolution", "pid": 0, "tid": tid, "ts": 1000 * i + 400},
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 0,
                "tid": 5,
                "ts": 1000 * i + 1,
                "dur": 2,
            },
        ]
    return ev


@pytest.mark.parametrize(
    "doc",
    [
        {"schemaVersion": 1, "traceEvents": _awkward_events(), "baseTimeNanoseconds": 1790857026000000000},
        {"traceEvents": _awkward_events(), "span_index": 3},  # paddle.profiler's header
        _awkward_events(),  # Chrome's bare array
    ],
    ids=["kineto", "paddle", "bare-array"],
)
@pytest.mark.parametrize("indent", [None, 2])
def test_arrow_and_msgspec_read_awkward_cases_alike(
    doc: Any, indent: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kineto, "ARROW_CHUNK_BYTES", 3000)  # pieces of a few events: some Arrow, some msgspec
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc, indent=indent).encode()))
    fast, slow, taken, one_by_one = _both(path, monkeypatch)
    _assert_equal(fast, slow)
    assert taken > 0 and 0 < one_by_one < len(_awkward_events())  # both paths ran
    tables = fast[0]
    assert fast[2] == 100  # the batch size: the first convolution's N
    assert "conv2d dygraph" in tables[t.OPERATORS]["name"].to_pylist()
    assert set(tables) == {t.CUDA_API, t.KERNELS, t.MEMCPY, t.NVTX, t.OPERATORS}


def test_mxnet_pairs_and_unsigned_ids_read_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mxnet.json"
    path.write_text(json.dumps({"traceEvents": _mxnet_events()}))
    fast, slow, _taken, _one_by_one = _both(path, monkeypatch)
    _assert_equal(fast, slow)
    ops = fast[0][t.OPERATORS]
    assert ops.num_rows == 30 and ops["source"][0].as_py() == t.SOURCE_MXNET
    assert ops["tid"][0].as_py() == (2**64 - 12345) & kineto.MAX_NS


def test_times_are_exact_ns(tmp_path: Path) -> None:
    """4544699557751.704 µs is 4544699557751704 ns exactly (its nearest double is not)."""
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [{**launch, "ts": 4544699557751.704, "dur": 0.001}]}))
    tables, clock, _batch = kineto.parse(path)
    api = tables[t.CUDA_API]
    assert api["start_ns"][0].as_py() - clock.offset_ns == 4544699557751704
    assert api["dur_ns"][0].as_py() == 1


def test_strings_stay_codes_in_memory_and_files_read_back_plain(
    real_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader hands string columns over dictionary-encoded (each distinct kernel name once); the run
    folder's files read back with the declared plain schemas and the same values, in row groups of at most
    `TABLE_ROW_GROUP_ROWS` rows (the writer's buffers stay one group's; made small here, so that the
    fixture's tables are cut)."""
    import pyarrow.parquet as pq

    from analyzers.ingest import pipeline, writing
    from tracer.core.runfolder import RunFolder

    monkeypatch.setattr(writing, "TABLE_ROW_GROUP_ROWS", 4096)

    path = real_fixtures / FIXTURES[0]
    tables, _clock, _batch = kineto.parse(path)
    kernels = tables[t.KERNELS]
    names = kernels["name"].combine_chunks()
    assert t.has_dictionaries(kernels) and len(names.dictionary) < len(names) / 10
    assert kernels["short_name"].equals(kernels["name"])
    folder = RunFolder.create(tmp_path, "run")
    pipeline.ingest_file(path, folder)
    for name, table in tables.items():
        stored = pq.ParquetFile(folder.table_path(name))
        back = stored.read()
        assert back.schema == t.SCHEMAS[name] and back.equals(t.plain(table, t.SCHEMAS[name])), name
        groups = [stored.metadata.row_group(i).num_rows for i in range(stored.num_row_groups)]
        assert max(groups) <= 4096 and sum(groups) == table.num_rows
    assert pq.ParquetFile(folder.table_path(t.KERNELS)).num_row_groups > 1
