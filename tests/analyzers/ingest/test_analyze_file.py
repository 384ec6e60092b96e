"""`tracer analyze FILE`: a trace file analysed directly (an nsys export summarised straight from the file,
other formats imported once into the cache)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analyzers.ingest import nsys_summary
from analyzers.ingest.import_cache import IMPORTS_DIR, cache_name
from analyzers.summaries import cuda_api, kernels, threads
from analyzers.summaries.rows import ApiRow, KernelRow, MemcpyRow, ThreadRow
from tests.analyzers.conftest import NSYS_FILES
from tracer.core.runfolder import RunFolder

FIXTURE = "extra-p/con_kernel.sqlite"


def _analyze(path: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"TRACER_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "tracer", "analyze", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_analyze_sqlite_file_summarised_once(real_fixtures: Path, tmp_path: Path) -> None:
    """No import: the summaries come straight from the file, are kept in the cache by the file's identity
    and read from there by the next call; a changed file is summarised afresh."""
    trace = tmp_path / "con_kernel.sqlite"
    shutil.copyfile(real_fixtures / FIXTURE, trace)
    cache = tmp_path / "cache"
    first = _analyze(trace, cache)
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    expected = cuda_api.api_summary_sqlite(trace)
    assert [(r["name"], r["total_ns"], r["calls"], r["med_ns"]) for r in data["cuda_api"]] == [
        (r.name, r.total_ns, r.calls, r.med_ns) for r in expected
    ]
    assert not (cache / IMPORTS_DIR).exists()  # nothing imported
    (stored,) = (cache / nsys_summary.SUMMARIES_DIR).iterdir()
    made = stored.stat().st_mtime_ns
    written = stored.stat().st_ino  # a summary computed again is a new file renamed into place
    again = _analyze(trace, cache)
    assert again.returncode == 0 and json.loads(again.stdout) == data
    assert stored.stat().st_ino == written  # read, not computed again (its mtime marks the use: eviction)
    os.utime(trace, ns=(made, made + 10**9))  # a changed file is summarised afresh
    assert _analyze(trace, cache).returncode == 0
    assert len(list((cache / nsys_summary.SUMMARIES_DIR).iterdir())) == 2


STARTUP_EXCLUDED = ("pandas", "pyarrow", "numpy", "pydantic")
"""Modules `tracer analyze FILE` of an SQLite export must not import: nothing of its summary needs them (DuckDB
reads the file, its rows are Python tuples), and they cost 0.3 s of CPU at every start, the whole of a cached
call's budget (pandas alone, pulled in by pyarrow's probe for it, had cost 0.45 s of a 2.5 s summary)."""


def test_analyze_file_imports_no_arrow_numpy_or_pandas(real_fixtures: Path, tmp_path: Path) -> None:
    """The direct summary's start-up is part of what a user waits for on every file (issue #42): the first
    call, which computes the summary, and the second, which reads it from the cache."""
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['tracer', 'analyze', {str(real_fixtures / FIXTURE)!r}, '--format', 'json']\n"
        "try:\n    runpy.run_module('tracer', run_name='__main__')\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        f"print(sorted(m for m in {STARTUP_EXCLUDED!r} if m in sys.modules), file=sys.stderr)\n"
    )
    env = os.environ | {"TRACER_CACHE": str(tmp_path / "cache")}
    outputs = []
    for _call in ("computed", "cached"):
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["cuda_api"] and json.loads(done.stdout)["kernels"]  # it did summarise
        assert done.stderr.strip().splitlines()[-1] == "[]", _call
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert len(list((tmp_path / "cache" / nsys_summary.SUMMARIES_DIR).iterdir())) == 1


def test_analyze_file_with_no_writable_cache(real_fixtures: Path, tmp_path: Path) -> None:
    """A cache that cannot be made (here under a plain file) costs the next call the computation, nothing else."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    proc = _analyze(real_fixtures / FIXTURE, blocker / "cache")
    assert proc.returncode == 0, proc.stderr
    assert [r["name"] for r in json.loads(proc.stdout)["cuda_api"]] == [
        r.name for r in cuda_api.api_summary_sqlite(real_fixtures / FIXTURE)
    ]


def test_a_fifo_or_link_planted_in_the_cache_is_never_read_or_written_through(
    real_fixtures: Path, tmp_path: Path
) -> None:
    """The cache entry's name is predictable: a FIFO there would hang a plain read, a link there would
    have the summary written into whatever it points at (a run's run.json)."""
    trace = tmp_path / "con_kernel.sqlite"
    shutil.copyfile(real_fixtures / FIXTURE, trace)
    cache = tmp_path / "cache"
    entry = cache / nsys_summary.SUMMARIES_DIR / f"{cache_name(trace)}.json"
    entry.parent.mkdir(parents=True)
    os.mkfifo(entry)
    first = _analyze(trace, cache)  # subprocess.run's timeout fails the test if the FIFO is opened
    assert first.returncode == 0, first.stderr
    assert entry.is_file()  # the FIFO was replaced by the summary
    victim = tmp_path / "run" / "run.json"  # a run beside the cache, not around it (that is refused)
    victim.parent.mkdir()
    victim.write_text("{}")
    entry.unlink()
    entry.symlink_to(victim)
    assert _analyze(trace, cache).returncode == 0
    assert victim.read_text() == "{}" and not entry.is_symlink()


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_direct_summary_equals_the_imported_run(real_fixtures: Path, ingested: dict[str, RunFolder], rel: str) -> None:
    """Every row of the direct summaries equals the imported run's (`analyzers.summaries.cuda_api`, `kernels`,
    `threads`), floats to 1e-12 (DuckDB's standard deviation depends on the order it meets the rows in)."""
    found = nsys_summary.summarise(real_fixtures / rel)
    folder = ingested[rel]
    assert _close([ApiRow(*r) for r in found.cuda_api], cuda_api.api_summary(folder))
    assert _close([KernelRow(*r) for r in found.kernels], kernels.kernel_summary(folder))
    assert _close([MemcpyRow(*r) for r in found.memcpy], kernels.memcpy_summary(folder))
    rows = [ThreadRow(*r) for r in found.threads if threads.shown(r[1], r[2])]
    assert _close(rows, threads.thread_summary(folder))
    assert found.cuda_api and (found.threads or rel != "extra-p/ex-gpu.s10.sqlite")


def test_direct_summary_of_arrow_export_equals_sqlite(real_fixtures: Path, tmp_path: Path) -> None:
    from tests.analyzers.ingest.test_nsys_arrow import _as_nsys_arrow

    arrow = tmp_path / "con_kernel.arrow"
    _as_nsys_arrow(real_fixtures / FIXTURE, arrow)
    assert nsys_summary.readable(arrow)
    assert _close(nsys_summary.summarise(arrow), nsys_summary.summarise(real_fixtures / FIXTURE))


def _close(a: object, b: object) -> bool:
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return type(a) is type(b) and _close(dataclasses.astuple(a), dataclasses.astuple(b))  # type: ignore[arg-type]
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


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
