"""A `.nsys-rep` beside its `.sqlite` twin: a twin a few ms older than the report (nsys finished the report
after the export, or a copy rounded the times) is its export and is read, with no nsys needed; a much older
file of that name is not, and without an nsys the refusal says why it was skipped and which nsys wrote the
report (read from the report itself)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analyzers.trace import tables as t
from tests.conftest import run_tracer
from tracer.core.runfolder import list_runs

H100_SQLITE = "nsys-h100/resnet18_train_nsys2025.3.1.sqlite"
VERSION = b"2025.3.1.90-253135822126"


def _report_with_twin(real_fixtures: Path, where: Path, older_s: float) -> Path:
    """A report (its header and the writer's version field, as nsys writes them) and the real export beside it,
    `older_s` seconds older."""
    where.mkdir(parents=True)
    report = where / "train.nsys-rep"
    report.write_bytes(b"NVIDIA Tegra Profiler Report 1.\n\x32" + bytes([len(VERSION)]) + VERSION)
    twin = where / "train.sqlite"
    shutil.copyfile(real_fixtures / H100_SQLITE, twin)
    made = report.stat().st_mtime
    os.utime(twin, (made - older_s, made - older_s))
    return report


def test_a_twin_a_few_ms_older_is_the_reports_export(real_fixtures: Path, tmp_path: Path) -> None:
    report = _report_with_twin(real_fixtures, tmp_path / "a", older_s=0.005)
    done = run_tracer("import", str(report), "--out", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    direct = run_tracer("import", str(real_fixtures / H100_SQLITE), "--out", str(tmp_path / "direct"))
    assert direct.returncode == 0, direct.stderr
    (via_twin,), (plain,) = list_runs(tmp_path / "runs"), list_runs(tmp_path / "direct")
    assert pq.read_table(via_twin.table_path(t.KERNELS)).equals(pq.read_table(plain.table_path(t.KERNELS)))
    assert (via_twin.raw_dir / "train.sqlite").is_file()  # what was read is kept beside the report


def test_a_much_older_file_is_skipped_and_the_refusal_says_why(
    real_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NSYS", str(tmp_path / "no-nsys-here"))  # as on a machine without Nsight Systems
    report = _report_with_twin(real_fixtures, tmp_path / "b", older_s=3600)
    done = run_tracer("import", str(report), "--out", str(tmp_path / "runs"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    said = done.stderr
    assert "needs Nsight Systems (the report was written by nsys 2025.3.1)" in said, said
    assert "no-nsys-here" in said  # what was looked for
    assert "train.sqlite beside it is 3600 s older than the report, so it is not taken for its export" in said, said
