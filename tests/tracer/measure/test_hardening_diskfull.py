"""Issue 12, defect 4: a full disk is a recorded cause. A real tmpfs (mounted by the test, which needs
root) holds the runs folder; a filler file leaves little or no space."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import TINY, require_framework, run_tracer, tmpfs
from tracer.core.runfolder import list_runs

TMPFS_SIZE = "4m"


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", TMPFS_SIZE) as mount:
        yield mount


def _fill(disk: Path, leave_bytes: int) -> None:
    free = shutil.disk_usage(disk).free
    with (disk / "filler").open("wb") as f:
        try:
            f.write(b"\0" * max(0, free - leave_bytes))
        except OSError:
            pass


def test_disk_filling_during_the_run_is_the_recorded_cause(tiny_disk: Path) -> None:
    require_framework("pytorch")
    _fill(tiny_disk, 400 * 1024)
    out = tiny_disk / "runs"
    result = run_tracer("profile", "--framework", "pytorch", "--model", "alexnet", *TINY, "--sample-hz", "100",
                        "--out", str(out))  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "disk full" in result.stderr, result.stderr[-3000:]
    (folder,) = list_runs(out)
    record = json.loads(folder.run_json.read_text())
    assert record["outcome"]["status"] != "running"
    assert record["outcome"]["cause"].startswith("disk full"), record["outcome"]
    assert record["sampling"] is not None
    shown = run_tracer("show", str(folder.path))
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr


def test_no_space_at_all_is_one_line_and_no_half_folder(tiny_disk: Path) -> None:
    require_framework("pytorch")
    out = tiny_disk / "runs"
    out.mkdir()
    _fill(tiny_disk, 0)
    result = run_tracer("profile", "--framework", "pytorch", "--model", "alexnet", *TINY, "--out", str(out))
    assert result.returncode == 2, result.stderr[-3000:]
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("tracer: error:") and "space" in lines[-1], result.stderr
    assert "Traceback" not in result.stderr
    assert list(out.iterdir()) == []


@pytest.mark.parametrize(
    "trace", ["kineto-h100/resnet50_bs100_train_torch2.11.json.gz", "nsys-h100/resnet18_train_nsys2025.3.1.sqlite"]
)
def test_import_onto_a_full_disk_blames_the_disk(trace: str, tiny_disk: Path, real_fixtures: Path) -> None:
    """Issue 27, item 13: it said 'damaged or truncated export' of a good file."""
    _fill(tiny_disk, 64 * 1024)
    out = tiny_disk / "runs"
    result = run_tracer("import", str(real_fixtures / trace), "--out", str(out))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "disk full" in lines[0] and "damaged" not in lines[0], result.stderr
    assert not out.exists() or list(out.iterdir()) == []
