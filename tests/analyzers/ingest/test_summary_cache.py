"""Issue 56 item 22, for the nsys summaries `tracer analyze FILE.sqlite` keeps: the same policy as the
imports' (`analyzers.ingest.import_cache`): never written into a run folder through a linked cache, a
temp-space folder when the cache cannot be made, a full disk named with its path, old entries evicted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from analyzers.ingest.import_cache import SUMMARIES_DIR, SUMMARIES_KEPT, TEMP_PREFIX, cache_name
from tests.conftest import run_tracer, tmpfs
from tracer.core.runfolder import list_runs

FIXTURE = "extra-p/con_kernel.sqlite"


def _analyze(trace: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"TRACER_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "tracer", "analyze", str(trace)], capture_output=True, text=True, env=env, timeout=600
    )


def _copy(real_fixtures: Path, tmp_path: Path) -> Path:
    trace = tmp_path / "con_kernel.sqlite"
    shutil.copyfile(real_fixtures / FIXTURE, trace)
    return trace


def test_a_cache_linked_into_a_run_folder_is_refused(real_fixtures: Path, tmp_path: Path) -> None:
    """TRACER_CACHE a link to a run folder: one line, and the run's files are as they were."""
    out = tmp_path / "runs"
    assert (
        run_tracer("import", "--out", str(out), str(real_fixtures / "hta" / "triton_example.json.gz")).returncode == 0
    )
    (run,) = list_runs(out)
    before = sorted(p.relative_to(run.path) for p in run.path.rglob("*"))
    link = tmp_path / "cache"
    link.symlink_to(run.path)
    result = _analyze(_copy(real_fixtures, tmp_path), link)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "lies inside the run folder" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.relative_to(run.path) for p in run.path.rglob("*")) == before


def test_a_cache_that_cannot_be_made_keeps_the_summary_in_temp_space(real_fixtures: Path, tmp_path: Path) -> None:
    """A cache under a plain file (as a read-only home is, for root): the summary is kept in the system's
    temp space, so the next call reads it rather than computing it again."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    trace = _copy(real_fixtures, tmp_path)
    result = _analyze(trace, blocker / "cache")
    assert result.returncode == 0, result.stderr[-2000:]
    kept = Path(tempfile.gettempdir()) / f"{TEMP_PREFIX}{SUMMARIES_DIR}-{os.getuid()}" / f"{cache_name(trace)}.json"
    assert kept.is_file()
    kept.unlink()


def test_old_summaries_are_evicted_past_their_bound(real_fixtures: Path, tmp_path: Path) -> None:
    """More summaries than the bound already kept: one more call leaves the bound, the oldest used gone."""
    summaries = tmp_path / "cache" / SUMMARIES_DIR
    summaries.mkdir(parents=True)
    for i in range(SUMMARIES_KEPT + 10):
        old = summaries / f"old-{i:04d}.json"
        old.write_text("{}")
        os.utime(old, (1_000_000 + i, 1_000_000 + i))
    trace = _copy(real_fixtures, tmp_path)
    result = _analyze(trace, tmp_path / "cache")
    assert result.returncode == 0, result.stderr[-2000:]
    kept = {p.name for p in summaries.iterdir()}
    assert len(kept) == SUMMARIES_KEPT and f"{cache_name(trace)}.json" in kept
    assert "old-0000.json" not in kept and f"old-{SUMMARIES_KEPT + 9:04d}.json" in kept


def test_a_full_cache_is_named_and_the_summary_still_shown(real_fixtures: Path, tmp_path: Path) -> None:
    """The cache on a full tmpfs: the summary is printed, and one warning names the cache's path."""
    with tmpfs(tmp_path / "disk", "64k") as disk:
        (disk / "cache" / SUMMARIES_DIR).mkdir(parents=True)
        with (disk / "filler").open("wb") as f:
            try:
                f.write(b"\0" * (1 << 20))
            except OSError:
                pass
        result = _analyze(_copy(real_fixtures, tmp_path), disk / "cache")
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
        assert "cuda" in result.stdout.lower(), result.stdout  # the summary, shown
        (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert "disk full" in line and str(disk) in line and "TRACER_CACHE" in line, line
