"""nsys's Arrow export: a real one (Debian's nsys 2022.4, a report of a Python process made here) and
the SQLite fixtures rewritten in its format give the same tables as the SQLite path."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from analyzers.ingest import nsys_arrow, nsys_duckdb
from analyzers.ingest.pipeline import ingest_file, run_traces, trace_kind
from analyzers.trace import tables
from tests.analyzers.conftest import NSYS_FILES
from tests.tracer.measure.tracing.helpers import record_nsys_report, require_nsys
from tracer.core import trace_formats as tf
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder
from tracer.measure.tracing.nsys import nsys_export_types


def _arrow_type(values: tuple[object, ...]) -> pa.DataType:
    """A column's type from its values, as nsys 2022.4 writes them: text as binary (its Arrow export
    has no utf8 columns), integers as int64."""
    kinds = {type(v) for v in values if v is not None}
    if bytes in kinds:
        return pa.binary()
    return pa.float64() if float in kinds else pa.int64()


def _as_nsys_arrow(sqlite: Path, out: Path) -> None:
    """Every table of a SQLite export as nsys's Arrow export lays them out: one IPC stream per table,
    one after another, each schema tagged with `table_name`."""
    con = sqlite3.connect(f"file:{sqlite}?mode=ro", uri=True)
    con.text_factory = bytes
    with out.open("wb") as sink:
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            name = name.decode()
            names = [c.decode() for (c,) in con.execute(f"SELECT name FROM pragma_table_info('{name}')")]
            rows = con.execute(f'SELECT * FROM "{name}" ORDER BY rowid').fetchall()
            cols = list(zip(*rows)) if rows else [()] * len(names)
            fields = [pa.field(n, _arrow_type(c)) for n, c in zip(names, cols)]
            schema = pa.schema(fields, metadata={b"table_name": name.encode()})
            table = pa.table([pa.array(c, f.type) for c, f in zip(cols, fields)], schema=schema)
            with ipc.new_stream(sink, schema) as writer:
                writer.write_table(table)
    con.close()


def _same_tables(a_dir: Path, a_names: list[str], b_dir: Path, b_names: list[str]) -> None:
    assert a_names == b_names
    for name in a_names:
        a, b = pq.read_table(a_dir / f"{name}.parquet"), pq.read_table(b_dir / f"{name}.parquet")
        assert a.schema == b.schema == tables.SCHEMAS[name]
        keys = [(c, "ascending") for c in a.column_names]
        assert a.sort_by(keys).equals(b.sort_by(keys)), name


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_fixtures_in_arrow_form_ingest_as_sqlite_does(rel: str, real_fixtures: Path, tmp_path: Path) -> None:
    arrow = tmp_path / "export.arrow"
    _as_nsys_arrow(real_fixtures / rel, arrow)
    assert trace_kind(arrow) == tf.NSYS_ARROW and trace_kind(arrow.rename(tmp_path / "export")) == tf.NSYS_ARROW
    (tmp_path / "export").rename(arrow)
    from_arrow, from_sqlite = tmp_path / "a", tmp_path / "s"
    from_arrow.mkdir()
    from_sqlite.mkdir()
    a_names, a_clock = nsys_arrow.write_arrow(arrow, from_arrow)
    s_names, s_clock = nsys_duckdb.write_sqlite(real_fixtures / rel, from_sqlite)
    assert a_clock == s_clock and tables.CUDA_API in a_names
    _same_tables(from_arrow, a_names, from_sqlite, s_names)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real report: a Python process sleeping and reading a few hundred times, OS runtime traced."""
    code = "import time\nfor _ in range(300):\n    time.sleep(0.001)\n    open('/proc/self/stat').read()"
    return record_nsys_report(tmp_path_factory.mktemp("report") / "r", [sys.executable, "-c", code])


@pytest.mark.nsys
def test_a_real_arrow_export_ingests_as_its_sqlite_export_does(report: Path, tmp_path: Path) -> None:
    nsys_bin = str(require_nsys())
    if "arrow" not in nsys_export_types(nsys_bin):
        pytest.skip(f"{nsys_bin} offers no Arrow export")
    exports = {}
    for kind in ("arrow", "sqlite"):
        exports[kind] = tmp_path / f"r.{kind}"
        subprocess.run(
            [nsys_bin, "export", "-q", "true", "-t", kind, "-o", str(exports[kind]), str(report)],
            capture_output=True,
            check=True,
            timeout=300,
        )
    streams = nsys_arrow.read_streams(exports["arrow"])
    assert streams["StringIds"].schema.field("value").type == pa.string()  # nsys wrote binary
    from_arrow, from_sqlite = tmp_path / "a", tmp_path / "s"
    from_arrow.mkdir()
    from_sqlite.mkdir()
    a_names, a_clock = nsys_arrow.write_arrow(exports["arrow"], from_arrow)
    s_names, s_clock = nsys_duckdb.write_sqlite(exports["sqlite"], from_sqlite)
    assert a_clock == s_clock and a_names == [tables.OSRT]
    _same_tables(from_arrow, a_names, from_sqlite, s_names)
    osrt = pq.read_table(from_arrow / f"{tables.OSRT}.parquet")
    # the profiled process's thread: named python, or nsys-launcher where nsys took its name before the launcher
    # exec'd python (seen on a busy machine, CI-like run of 6 Dec): one process either way
    names = " ".join(set(osrt["thread_name"].to_pylist())).lower()
    assert osrt.num_rows >= 300 and ("python" in names or "nsys-launcher" in names), names


@pytest.mark.nsys
def test_a_report_is_ingested_through_the_export_nsys_offers(report: Path, tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    assert ingest_file(report, folder) == [tables.OSRT]
    assert not list(folder.path.glob("*.arrow")) and not list(folder.path.glob("*.sqlite"))  # scratch only


@pytest.mark.nsys
def test_an_arrow_export_it_cannot_read_falls_back_to_sqlite_from_its_report(report: Path, tmp_path: Path) -> None:
    """As another nsys release's Arrow layout would: `trace.arrow` unreadable, `trace.nsys-rep` beside it."""
    folder = RunFolder.create(tmp_path, "r")
    (folder.raw_dir / "trace.nsys-rep").write_bytes(report.read_bytes())
    (folder.raw_dir / "trace.arrow").write_bytes(b"\xff\xff\xff\xff not the layout we know")
    assert [p.name for p in run_traces(folder)] == ["trace.arrow"]
    assert ingest_file(folder.raw_dir / "trace.arrow", folder) == [tables.OSRT]
    assert pq.read_table(folder.table_path(tables.OSRT)).num_rows >= 300


def test_an_arrow_export_wins_over_sqlite_and_report(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "r")
    for name in ("trace.nsys-rep", "trace.sqlite", "trace.arrow", "other.nsys-rep"):
        (folder.raw_dir / name).write_bytes(b"x")
    assert [p.name for p in run_traces(folder)] == ["other.nsys-rep", "trace.arrow"]


def test_bad_arrow_files_are_one_line_user_errors(real_fixtures: Path, tmp_path: Path) -> None:
    good = tmp_path / "good.arrow"
    _as_nsys_arrow(real_fixtures / NSYS_FILES[1], good)
    untagged = tmp_path / "untagged.arrow"
    with untagged.open("wb") as sink, ipc.new_stream(sink, pa.schema([("a", pa.int64())])) as w:
        w.write_table(pa.table({"a": [1]}))
    foreign = tmp_path / "foreign.arrow"
    schema = pa.schema([("name", pa.binary())], metadata={b"table_name": b"people"})
    with foreign.open("wb") as sink, ipc.new_stream(sink, schema) as w:
        w.write_table(pa.table({"name": [b"ada"]}, schema=schema))
    truncated = tmp_path / "truncated.arrow"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    says = {untagged: "without a table name", foreign: "not an Nsight Systems export", truncated: "Arrow export"}
    for path, text in says.items():
        folder = RunFolder(tmp_path / f"run-{path.stem}")
        with pytest.raises(UserError, match=text) as info:
            ingest_file(path, folder)
        assert "\n" not in str(info.value) and str(path) in str(info.value)
        assert not list(folder.path.glob("*.parquet"))


@pytest.mark.nsys
def test_a_report_is_summarised_as_its_import_is(report: Path, tmp_path: Path) -> None:
    """`tracer analyze x.nsys-rep` summarises the report's export directly: the rows of the imported run."""
    from analyzers.ingest import nsys_summary
    from analyzers.summaries import threads

    folder = RunFolder(tmp_path / "run")
    ingest_file(report, folder)
    found = nsys_summary.summarise(report)
    rows = [threads.ThreadRow(*r) for r in found.threads if threads.shown(r[1], r[2])]
    assert rows and rows == threads.thread_summary(folder)
    assert found.cuda_api == found.kernels == found.memcpy == []  # OS runtime traced only
