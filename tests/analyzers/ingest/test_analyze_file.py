"""`tracer analyze FILE`: a trace file analysed directly, imported once into the cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analyzers.ingest import IMPORTS_DIR
from analyzers.summaries import cuda_api

FIXTURE = "extra-p/con_kernel.sqlite"


def _analyze(path: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"TRACER_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "tracer", "analyze", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_analyze_sqlite_file_imports_once(shared_fixtures: Path, tmp_path: Path) -> None:
    trace = tmp_path / "con_kernel.sqlite"
    shutil.copyfile(shared_fixtures / FIXTURE, trace)
    cache = tmp_path / "cache"
    first = _analyze(trace, cache)
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    expected = cuda_api.api_summary_sqlite(trace)
    assert [(r["name"], r["total_ns"], r["calls"], r["med_ns"]) for r in data["cuda_api"]] == [
        (r.name, r.total_ns, r.calls, r.med_ns) for r in expected
    ]
    (folder,) = (cache / IMPORTS_DIR).iterdir()
    made = (folder / "cuda_api.parquet").stat().st_mtime_ns
    again = _analyze(trace, cache)
    assert again.returncode == 0 and json.loads(again.stdout) == data
    assert (folder / "cuda_api.parquet").stat().st_mtime_ns == made  # reused, not re-imported
    os.utime(trace, ns=(made, made + 10**9))  # a changed file is imported afresh
    assert _analyze(trace, cache).returncode == 0
    assert len(list((cache / IMPORTS_DIR).iterdir())) == 2


def test_analyze_non_trace_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    proc = _analyze(bad, tmp_path / "cache")
    assert proc.returncode == 2
    assert "not a trace" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("name", ["broken.sqlite"])
def test_analyze_damaged_sqlite_is_one_line(tmp_path: Path, name: str) -> None:
    bad = tmp_path / name
    bad.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    proc = _analyze(bad, tmp_path / "cache")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "a damaged SQLite database" in proc.stderr, proc.stderr
    imports = tmp_path / "cache" / IMPORTS_DIR  # refused from its first bytes: nothing cached, maybe no folder
    assert not imports.exists() or not [p for p in imports.iterdir() if not p.name.startswith(".")]
