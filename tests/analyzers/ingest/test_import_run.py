"""`tracer import`'s work as an analyzers function (`analyzers.ingest.import_run.import_trace`): the CLI parses,
calls it and prints; here it is called directly, on a real Kineto trace and on a file that is no trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.ingest.import_run import ImportLabels, import_trace
from tracer.core.errors import UserError
from tracer.core.runfolder import list_runs


def test_a_trace_becomes_a_finished_run(real_fixtures: Path, tmp_path: Path) -> None:
    trace = real_fixtures / "hta" / "triton_example.json.gz"
    done = import_trace([trace], tmp_path, ImportLabels(model="resnet50"))
    assert [r.path for r in list_runs(tmp_path)] == [done.folder.path]
    assert [p.name for p in tmp_path.iterdir()] == [done.folder.path.name]  # no staging folder left
    record = done.folder.read_record()
    assert record.measurement.framework == "pytorch"  # Kineto is PyTorch's profiler: the label follows the format
    assert record.imported is not None and record.imported.model == "resnet50"
    assert record.trace_files == (f"raw/{trace.name}",)
    assert done.label == trace and done.ranks == 0 and done.alignment is None
    assert done.tables and all(done.folder.table_path(name).exists() for name in done.tables)


def test_a_file_that_is_no_trace_leaves_nothing(tmp_path: Path) -> None:
    junk = tmp_path / "notes.json"
    junk.write_text('{"hello": 1}')
    out = tmp_path / "runs"
    out.mkdir()
    with pytest.raises(UserError):
        import_trace([junk], out, ImportLabels())
    assert list(out.iterdir()) == []


def test_steps_come_from_a_traces_own_ranges_whatever_its_format(tmp_path: Path) -> None:
    """The steps of a trace's own `ProfilerStep#N` ranges are derived in one place for every reader's tables
    (`trace_steps.write_steps`): a rocpd trace whose roctx ranges are PyTorch's steps has them as a Kineto
    trace would, and the same trace with other range names has no steps table."""
    import sqlite3

    import pyarrow.parquet as pq

    from analyzers.ingest.trace_steps import PROBE_KINETO
    from tests.analyzers.ingest.test_imports import _make_rpd
    from tracer.core import schema

    plain, stepped = tmp_path / "plain.rpd", tmp_path / "stepped.rpd"
    for rpd in (plain, stepped):
        _make_rpd(rpd, steps=5, seed=1)
    con = sqlite3.connect(stepped)
    con.execute("UPDATE rocpd_string SET string = 'ProfilerStep#' || substr(string, 6) WHERE string LIKE 'step %'")
    con.commit()
    con.close()
    made = {rpd.stem: import_trace([rpd], tmp_path / rpd.stem, ImportLabels()).folder for rpd in (plain, stepped)}
    assert not made["plain"].sample_parquet_path(schema.STEPS_TABLE).exists()
    steps = pq.read_table(made["stepped"].sample_parquet_path(schema.STEPS_TABLE)).to_pylist()
    assert [s["step"] for s in steps] == [0, 1, 2, 3, 4]
    assert {(s["rank"], s["probe"], s["data_wait_s"]) for s in steps} == {(0, PROBE_KINETO, 0.0)}
    assert all(abs(s["compute_s"] - 400e-6) < 1e-12 for s in steps)
