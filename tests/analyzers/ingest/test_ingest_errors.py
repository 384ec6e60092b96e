"""Corrupt, truncated and foreign inputs: one-line UserError from the API, exit code 2 from the CLI."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

import pytest

from analyzers.ingest.pipeline import ingest_file, ingest_run
from tests.conftest import run_tracer
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder


def bad_files(real_fixtures: Path, tmp: Path) -> dict[str, Path]:
    sqlite_bytes = (real_fixtures / "nsys-h100/resnet18_train_nsys2025.3.1.sqlite").read_bytes()
    gz_bytes = (real_fixtures / "kineto-h100/resnet50_bs100_train_torch2.11.json.gz").read_bytes()
    files = {
        "truncated.sqlite": sqlite_bytes[: len(sqlite_bytes) // 3],
        "garbage.sqlite": b"\x00\x01not a database at all" * 100,
        "truncated.json.gz": gz_bytes[: len(gz_bytes) // 2],
        "truncated.json": gzip.decompress(gz_bytes)[:200_000],
        "foreign.json": b'{"name": "package.json", "version": "1.0"}',
        "garbage.json.gz": b"\x1f\x8b\x08\x00garbage",
        "notes.txt": b"hello",
    }
    out = {}
    for name, data in files.items():
        (tmp / name).write_bytes(data)
        out[name] = tmp / name
    foreign = tmp / "foreign.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE people (name TEXT)")
    con.commit()
    con.close()
    out["foreign.sqlite"] = foreign
    return out


def test_bad_inputs_raise_one_line_user_errors(real_fixtures: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name, path in bad_files(real_fixtures, src).items():
        folder = RunFolder(tmp_path / f"run-{name}")
        folder.path.mkdir()
        with pytest.raises(UserError) as info:
            ingest_file(path, folder)
        msg = str(info.value)
        assert "\n" not in msg and str(path) in msg, name
        assert not list(folder.path.glob("*.parquet")), name


def test_inputs_are_opened_read_only(real_fixtures: Path, tmp_path: Path) -> None:
    copy = tmp_path / "ro.sqlite"
    copy.write_bytes((real_fixtures / "extra-p/con_kernel.sqlite").read_bytes())
    copy.chmod(0o444)
    before = copy.read_bytes()
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    assert "cuda_api" in ingest_file(copy, folder)
    assert copy.read_bytes() == before
    assert not (tmp_path / "ro.sqlite-journal").exists() and not (tmp_path / "ro.sqlite-wal").exists()


def test_ingest_run_reads_raw_and_is_repeatable(real_fixtures: Path, tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "r1")
    (folder.raw_dir / "report.sqlite").write_bytes((real_fixtures / "extra-p/con_kernel.sqlite").read_bytes())
    (folder.raw_dir / "worker.log").write_text("log\n")
    first = ingest_run(folder)
    assert set(first) == {"cuda_api", "kernels", "memcpy"}
    import pyarrow.parquet as pq

    n = pq.read_table(folder.table_path("cuda_api")).num_rows
    ingest_run(folder)  # rows of a source are replaced, not doubled
    assert pq.read_table(folder.table_path("cuda_api")).num_rows == n == 71


def test_cli_import_of_bad_file_exits_2_with_one_line(real_fixtures: Path, tmp_path: Path) -> None:
    files = bad_files(real_fixtures, tmp_path)
    for name in ("truncated.sqlite", "foreign.json", "notes.txt"):
        result = run_tracer("import", str(files[name]), "--out", str(tmp_path / "runs"))
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tracer: error:") and "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_nsys_export_types_read_from_its_help() -> None:
    """Capability, not version: the installed nsys's export types (Debian's 2022.4 offers arrow)."""
    from tracer.measure.tracing.nsys import nsys_export_types, nsys_if_any

    nsys = str(nsys_if_any() or "")
    if not nsys:
        pytest.skip("Nsight Systems is not installed (scripts/install_nsys.sh puts it in ~/.cache/dl-tracer/nsys)")
    types = nsys_export_types(nsys)
    assert "sqlite" in types, types
    assert nsys_export_types("/bin/false") == set()


def _kineto(kernel_args: dict | None = None, base: object = 1_700_000_000_000_000_000, **fields: object) -> dict:
    """A two-event Kineto trace (a launch and its kernel) with some fields replaced."""
    args = {"correlation": 5, "device": 0, "stream": 7, "grid": [4, 1, 1], "block": [128, 1, 1], **(kernel_args or {})}
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 5.0, "dur": 3.0, "pid": 1, "tid": 2}
    launch = {**launch, "args": {"correlation": 5}, **{k: v for k, v in fields.items() if k == "pid"}}
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "ts": 10.0, "dur": 2.0, "pid": 0, "tid": 7, "args": args}
    kernel.update({k: v for k, v in fields.items() if k in ("ts", "dur")})
    return {"traceEvents": [launch, kernel], "baseTimeNanoseconds": base}


@pytest.mark.parametrize(
    "trace,words",
    [
        (_kineto({"grid": [4, 1]}), "not 3 numbers"),
        (_kineto({"correlation": 2**64}), "64 bits"),
        (_kineto(pid=2**63), "64 bits"),
        (_kineto(ts=9.2e15, dur=9.2e15), "64 bits"),  # each fits int64 ns, their sum does not
        (_kineto(base=10**30), "baseTimeNanoseconds"),
        (_kineto(base=2**63 - 10), "64 bits"),  # wrapped to -9.2e18 before
        (_kineto(base=-5), "baseTimeNanoseconds"),
    ],
    ids=["grid-2", "correlation-2^64", "pid-2^63", "ts+dur", "base-1e30", "base-2^63-10", "base-negative"],
)
def test_kineto_numbers_out_of_range_are_one_line(trace: dict, words: str, tmp_path: Path) -> None:
    """Issue 27, item 7."""
    import json

    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    with pytest.raises(UserError, match=words):
        ingest_file(path, tmp_path / "tables")
    result = run_tracer("import", str(path), "--out", str(tmp_path / "runs"))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr, result.stderr


def test_nsys_string_that_is_not_utf8_is_one_line(real_fixtures: Path, tmp_path: Path) -> None:
    """Issue 27, item 7: a StringIds value stored as bytes that are not UTF-8."""
    path = tmp_path / "bad.sqlite"
    path.write_bytes((real_fixtures / "nsys-h100/resnet18_train_nsys2025.3.1.sqlite").read_bytes())
    con = sqlite3.connect(path)
    con.execute("UPDATE StringIds SET value = x'6b65726e656cff80'")
    con.commit()
    con.close()
    for args in (("import", str(path), "--out", str(tmp_path / "runs")), ("analyze", str(path))):
        result = run_tracer(*args)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
        assert len(result.stderr.strip().splitlines()) == 1 and "UTF-8" in result.stderr, result.stderr
