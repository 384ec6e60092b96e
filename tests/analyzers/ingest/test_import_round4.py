"""Issue 56, "Hardening, round four": foreign ranks told apart and imports bounded. Real `tracer import`
processes on real traces (the 8-rank DLRM Kineto files of PARAM, changed only where the defect needs it:
a rank moved a day later, times made relative), real archives, real links."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import run_tracer
from tracer.core.runfolder import list_runs

DAY_US = 86_400 * 10**6


def _dlrm(real_fixtures: Path, rank: int) -> Path:
    (path,) = (real_fixtures / "param-dlrm-8rank").glob(f"worker{rank}_*.json.gz")
    return path


def _rewritten(source: Path, target: Path, edit: Any) -> Path:
    """`source` (gzipped Kineto JSON) with `edit(trace)` applied, written gzipped to `target`."""
    trace = json.loads(gzip.decompress(source.read_bytes()))
    edit(trace)
    target.write_bytes(gzip.compress(json.dumps(trace).encode()))
    return target


def _one_line(result: Any, *words: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def test_08_two_jobs_ranks_a_day_apart_are_not_one_run(real_fixtures: Path, tmp_path: Path) -> None:
    """Rank 0 of one job and rank 1 of a job a day later: refused (their spans never overlap), never merged
    into one run whose straggler is "late by 8.64e+07 ms"."""
    def later(trace: dict[str, Any]) -> None:
        for e in trace["traceEvents"]:
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] += DAY_US

    job_b = _rewritten(_dlrm(real_fixtures, 1), tmp_path / "jobB_rank1.pt.trace.json.gz", later)
    out = tmp_path / "runs"
    result = run_tracer("import", "--out", str(out), str(_dlrm(real_fixtures, 0)), str(job_b))
    _one_line(result, "never overlap", "not one job")
    assert not list_runs(out) if out.exists() else True
    same_job = run_tracer("import", "--out", str(out), str(_dlrm(real_fixtures, 0)), str(_dlrm(real_fixtures, 1)))
    assert same_job.returncode == 0, same_job.stderr[-2000:]


def test_09_one_kineto_file_with_relative_times_is_imported(real_fixtures: Path, tmp_path: Path) -> None:
    """One trace (HTA's Triton example: one GPU, no collective) whose times start at 0 and which has no
    baseTimeNanoseconds is one trace on its own clock: imported, not refused for ranks that do not fit
    on one clock."""
    def relative(trace: dict[str, Any]) -> None:
        first = min(e["ts"] for e in trace["traceEvents"] if isinstance(e.get("ts"), (int, float)))
        for e in trace["traceEvents"]:
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] -= first
        trace.pop("baseTimeNanoseconds", None)

    source = real_fixtures / "hta" / "triton_example.json.gz"
    trace = _rewritten(source, tmp_path / "relative.pt.trace.json.gz", relative)
    result = run_tracer("import", "--out", str(tmp_path / "runs"), str(trace))
    assert result.returncode == 0, result.stderr[-2000:]
    (folder,) = list_runs(tmp_path / "runs")
    assert pq.read_metadata(folder.table_path("kernels")).num_rows > 0


def test_13_a_multi_rank_import_rebuilt_from_raw_keeps_every_rank(real_fixtures: Path, tmp_path: Path) -> None:
    """The tables of a two-rank import deleted: rebuilt from raw/ (as `analyze` does, and as a read-only
    folder's are in the cache), they hold each rank's rows as the import wrote them, not one rank's."""
    out = tmp_path / "runs"
    result = run_tracer("import", "--out", str(out), str(_dlrm(real_fixtures, 0)), str(_dlrm(real_fixtures, 1)))
    assert result.returncode == 0, result.stderr[-2000:]
    (folder,) = list_runs(out)
    imported = pq.read_table(folder.table_path("kernels"), columns=["rank"])["rank"].value_counts().to_pylist()
    assert len(imported) == 2
    for table in [*folder.path.glob("*.parquet"), folder.path / "trace_meta.json"]:
        table.unlink()
    analyzed = run_tracer("analyze", str(folder.path))
    assert analyzed.returncode == 0, analyzed.stderr[-2000:]
    rebuilt = pq.read_table(folder.table_path("kernels"), columns=["rank"])["rank"].value_counts().to_pylist()
    assert sorted(rebuilt, key=str) == sorted(imported, key=str)
