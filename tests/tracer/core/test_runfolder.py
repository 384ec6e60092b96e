"""The run folder survives crashes: atomic run.json, streams readable up to the last whole line."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from analyzers.figures.run_summary import summarise
from tracer.core.errors import UserError
from tracer.core.records import EnvironmentInfo, Outcome, RunRecord, RunSpec, RunStatus
from tracer.core.runfolder import CsvStream, RunFolder, find_run, read_csv_stream, read_jsonl, write_json_atomic


def record(run_id: str) -> RunRecord:
    env = EnvironmentInfo("h", "linux", "cpu", 2, 2, 1024.0, "3.11")
    return RunRecord.built_in(run_id, RunSpec("pytorch", "alexnet", "small"), env, Outcome(RunStatus.RUNNING), 1)


def test_record_round_trip(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "r1")
    rec = record("r1")
    folder.write_record(rec)
    assert folder.read_record() == rec
    assert json.loads(folder.run_json.read_text())["outcome"]["status"] == "running"


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_streams_tolerate_a_cut_last_line(tmp_path: Path) -> None:
    stream = CsvStream(tmp_path / "s.csv", ["t_ns", "v"])
    stream.append((1, 0.5))
    stream.append((2, 0.75))
    stream.close()
    with (tmp_path / "s.csv").open("a") as f:
        f.write("3,0.")  # a crash mid-write
    table = read_csv_stream(tmp_path / "s.csv")
    assert table.column("t_ns").to_pylist() == [1, 2]
    (tmp_path / "e.jsonl").write_text('{"kind": "a"}\n{"kind": "b"}\n{"kin')
    assert [e["kind"] for e in read_jsonl(tmp_path / "e.jsonl")] == ["a", "b"]


def test_damaged_and_unknown_runs_are_clear_errors(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "20260101-pytorch-x")
    with pytest.raises(UserError, match="no run.json"):
        folder.read_record()
    folder.run_json.write_text("{not json")
    with pytest.raises(UserError, match="unreadable"):
        folder.read_record()
    with pytest.raises(UserError, match="no run 'zzz'"):
        find_run(tmp_path, "zzz")


def test_a_folder_whose_tracer_died_shows_as_abandoned(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    folder = RunFolder.create(tmp_path, "r2")
    rec = record("r2")
    env = dataclasses.replace(rec.environment, hostname=socket.gethostname())
    folder.write_record(dataclasses.replace(rec, environment=env, tracer_pid=int(gone.stdout)))
    assert summarise(folder).status == "abandoned"
    started = int(psutil.Process().create_time() * 1e9)  # a run starts after its tracer (pids are reused)
    folder.write_record(dataclasses.replace(rec, environment=env, tracer_pid=os.getpid(), wall_start_ns=started))
    assert summarise(folder).status == "running"


def test_a_run_ended_before_its_first_sample_keeps_the_declared_schema(real_fixtures: Path, tmp_path: Path) -> None:
    """Issue 27, item 2 (`--timeout 0.001`): sample streams with a header and no row become Parquet
    tables with the declared column types, never null-typed ones, and every reader takes the run."""
    from tests.conftest import run_tracer
    from tracer.core.schema import SAMPLE_TABLES, SAMPLES_DIR

    source = real_fixtures / "gpu-h100" / "20261125-000240-pytorch-vgg16-small-gpu-b100-7ff0"
    run = tmp_path / "runs" / source.name
    shutil.copytree(source, run)
    folder = RunFolder(run)
    for old in (run / SAMPLES_DIR).iterdir():
        old.unlink()
    for table in SAMPLE_TABLES.values():
        CsvStream(folder.sample_stream_path(table.name), table.columns).close()
    assert folder.finalise_samples() == []
    for table in SAMPLE_TABLES.values():
        written = pq.read_schema(folder.sample_parquet_path(table.name))
        assert written.types == table.schema.types, table.name
        assert folder.samples(table.name).num_rows == 0
    for args in (("runs",), ("show", source.name), ("report", str(tmp_path / "runs"), "--out", str(tmp_path / "r"))):
        result = run_tracer(*args, "--runs", str(tmp_path / "runs")) if args[0] != "report" else run_tracer(*args)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (args, result.stderr[-2000:])


def test_a_profile_cut_before_its_first_sample_is_read_by_every_reader(tmp_path: Path) -> None:
    """Issue 27, item 2 end to end: `--timeout 0.001` crashed profile (ArrowInvalid) and then every reader."""
    from tests.conftest import TINY, require_framework, run_tracer

    require_framework("pytorch")
    runs = tmp_path / "runs"
    result = run_tracer("profile", "--framework", "pytorch", "--model", "alexnet", *TINY, "--timeout", "0.001",
                        "--out", str(runs))  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    (run,) = [p for p in runs.iterdir() if p.is_dir()]
    assert json.loads((run / "run.json").read_text())["outcome"]["status"] == "timeout"
    for args in (("runs", "--runs", str(runs)), ("show", run.name, "--runs", str(runs)),
                 ("report", str(runs), "--out", str(tmp_path / "report"))):  # fmt: skip
        shown = run_tracer(*args)
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, (args, shown.stderr[-2000:])
