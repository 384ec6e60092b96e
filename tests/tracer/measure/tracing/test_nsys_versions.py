"""Reports from another nsys release (issue 28 item 5): the report's version is read from the file, a report
newer than the nsys found is one line naming both versions and the ways out, an export beside the report
is read instead, and `tracer env nsys` says which nsys is used."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tests.tracer.measure.tracing.helpers import record_nsys_report, require_nsys
from tracer.core.runfolder import list_runs
from tracer.measure.tracing.nsys import nsys_version, report_version, version_text

H100_SQLITE = "nsys-h100/resnet18_train_nsys2025.3.1.sqlite"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real .nsys-rep written by the nsys found here (OS-runtime trace of a short sleep)."""
    sleep = shutil.which("sleep") or "/bin/sleep"
    return record_nsys_report(tmp_path_factory.mktemp("report") / "sleep", [sleep, "0.2"])


def _as_if_from(report: Path, year: str, out: Path) -> Path:
    """The report with its writer's version strings moved to `year` (same length, so every protobuf length
    byte stays right): what a report from a newer nsys looks like to the version check."""
    data = report.read_bytes()
    have = version_text(report_version(report)).encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data.replace(b"\x12" + have[:4], b"\x12" + year.encode()).replace(have, year.encode() + have[4:]))
    return out


def test_report_version_is_the_nsys_that_wrote_it(report: Path) -> None:
    made = report_version(report)
    assert made is not None and made == nsys_version(str(require_nsys()))


def test_a_version_inside_a_longer_string_is_not_the_report_version(tmp_path: Path) -> None:
    path_value = b"/opt/nvidia/nsight-systems/2025.3.1/bin:/usr/bin"
    one = tmp_path / "path-only.nsys-rep"
    one.write_bytes(b"NVIDIA Tegra Profiler Report 1.\n\x12" + bytes([len(path_value)]) + path_value)
    assert report_version(one) is None
    two = tmp_path / "field.nsys-rep"
    version = b"2026.1.2.204-abc1234"
    two.write_bytes(one.read_bytes() + b"\x32" + bytes([len(version)]) + version)
    assert report_version(two) == (2026, 1, 2)


def test_a_2023_report_version_with_its_build_suffix_and_no_nsight_compute(tmp_path: Path) -> None:
    """nsys 2023 and later end the version in `vN`; the recorded environment may hold Nsight Compute's
    version as a field of its own, which is not the report's."""
    report = tmp_path / "r.nsys-rep"
    field = b"".join(b"\x12" + bytes([len(v)]) + v for v in (b"NSIGHT_COMPUTE_VERSION", b"2023.2.2.3"))
    version = b"2023.2.3.1004-33186433v0"
    report.write_bytes(b"NVIDIA Tegra Profiler Report 1.\n" + field + b"\x32" + bytes([len(version)]) + version)
    assert report_version(report) == (2023, 2, 3)
    only_compute = tmp_path / "env-only.nsys-rep"
    only_compute.write_bytes(b"NVIDIA Tegra Profiler Report 1.\n" + field)
    assert report_version(only_compute) is None


def test_a_report_newer_than_nsys_is_one_line_with_both_versions(report: Path, tmp_path: Path) -> None:
    newer = _as_if_from(report, "2099", tmp_path / "newer" / "sleep.nsys-rep")
    assert report_version(newer) is not None and report_version(newer)[0] == 2099  # type: ignore[index]
    result = run_tracer("import", str(newer), "--out", str(tmp_path / "runs"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    have = version_text(nsys_version(str(require_nsys())))
    for words in ("written by nsys 2099.", f"newer than the nsys found ({have}", "set NSYS to an nsys 2099."):
        assert words in result.stderr, result.stderr
    assert "nsys export --type=sqlite sleep.nsys-rep" in result.stderr
    assert not list_runs(tmp_path / "runs")


def test_an_export_beside_the_report_is_read_without_nsys(report: Path, tmp_path: Path, real_fixtures: Path) -> None:
    """A newer report with its .sqlite beside it imports where no nsys is found at all."""
    newer = _as_if_from(report, "2099", tmp_path / "made-elsewhere" / "train.nsys-rep")
    shutil.copyfile(real_fixtures / H100_SQLITE, newer.with_suffix(".sqlite"))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin", TRACER_CACHE=str(tmp_path / "c"))
    env.pop("NSYS", None)
    cmd = [sys.executable, "-m", "tracer", "import", str(newer), "--out", str(tmp_path / "runs")]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    (run,) = list_runs(tmp_path / "runs")
    assert "kernels" in result.stdout and run.table_path("kernels").exists()
    assert (run.raw_dir / "train.sqlite").exists()  # kept beside the report: `analyze` re-reads it without nsys


def test_env_nsys_names_the_nsys_its_version_and_how_to_choose_another() -> None:
    nsys = require_nsys()
    result = run_tracer("env", "nsys")
    assert result.returncode == 0, result.stderr
    assert f"nsys {version_text(nsys_version(str(nsys)))}: {nsys}" in result.stdout
    assert "NSYS=/path/to/nsys" in result.stdout
