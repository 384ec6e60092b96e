"""`tracer report` on input it cannot use: one clear line and exit code 2, nothing half-written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder


def _bad(tmp_path: Path, which: str, run: RunFolder) -> Path:
    path = tmp_path / which
    if which == "empty-dir":
        path.mkdir()
    elif which == "a-file":
        path.write_text("hello")
    elif which == "damaged-run":
        shutil.copytree(run.path, path)
        (path / "run.json").write_text('{"run_id": ')
    return path


@pytest.mark.parametrize("which", ["missing", "empty-dir", "a-file", "damaged-run"])
def test_unusable_input_is_one_line_exit_2(tmp_path: Path, tiny_pytorch_run: RunFolder, which: str) -> None:
    out = tmp_path / "out"
    result = run_tracer("report", str(_bad(tmp_path, which, tiny_pytorch_run)), "--out", str(out))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracer: error:"), result.stderr
    assert not out.exists()


def test_damaged_run_inside_a_folder_is_skipped_with_a_warning(tmp_path: Path, tiny_pytorch_run: RunFolder) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(tiny_pytorch_run.path, runs / tiny_pytorch_run.run_id)
    _bad(runs, "damaged-run", tiny_pytorch_run)
    result = run_tracer("report", str(runs), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stderr and "damaged-run" in result.stderr
    assert (tmp_path / "out" / "index.html").is_file()
