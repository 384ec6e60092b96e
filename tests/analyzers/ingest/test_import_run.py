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
