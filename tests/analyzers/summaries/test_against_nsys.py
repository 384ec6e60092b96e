"""Our cuda_api_sum against `nsys stats` itself, where Nsight Systems is installed (the CI installs
Debian's 2022.4.2 under ~/.cache/dl-tracer/nsys). Older nsys cannot read newer schemas; such a
fixture is skipped with nsys's own reason."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from pathlib import Path

import pytest

from analyzers.summaries import cuda_api
from tests.analyzers.conftest import NSYS_FILES
from tracer.core.runfolder import RunFolder
from tracer.measure.tracing.nsys import nsys_if_any

pytestmark = pytest.mark.nsys


def nsys_stats(nsys: str, sqlite: Path) -> list[dict[str, str]]:
    for report in ("cuda_api_sum", "cudaapisum"):  # renamed in 2023
        proc = subprocess.run(
            [nsys, "stats", "--report", report, "--format", "csv", "--force-export", "false", str(sqlite)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if "could not be found" in proc.stdout + proc.stderr:
            continue
        text = proc.stdout[proc.stdout.find("Time (%)") :] if "Time (%)" in proc.stdout else ""
        if proc.returncode != 0 or not text:
            pytest.skip(f"nsys stats cannot read {sqlite.name}: {(proc.stderr or proc.stdout).strip()[-200:]}")
        return list(csv.DictReader(io.StringIO(text)))
    pytest.skip("this nsys has no CUDA API summary report")


# ex-gpu.s10 is left out: nsys stats counts its eventClass-67 backtrace duplicates; we filter them.
@pytest.mark.parametrize("rel", [f for f in NSYS_FILES if "ex-gpu" not in f])
def test_equals_nsys_stats(rel: str, real_fixtures: Path, ingested: dict[str, RunFolder], tmp_path: Path) -> None:
    nsys = str(nsys_if_any() or "")
    if not nsys:
        pytest.skip("Nsight Systems is not installed (scripts/install_nsys.sh puts it in ~/.cache/dl-tracer/nsys)")
    copy = tmp_path / Path(rel).name  # nsys may write beside its input
    shutil.copyfile(real_fixtures / rel, copy)
    theirs = nsys_stats(nsys, copy)
    ours = cuda_api.api_summary(ingested[rel])
    assert len(ours) == len(theirs)
    by_key = {(r["Name"], int(r["Total Time (ns)"])): r for r in theirs}
    for row in ours:
        t = by_key[(row.name, row.total_ns)]
        assert int(t["Num Calls"]) == row.calls
        assert (int(t["Min (ns)"]), int(t["Max (ns)"])) == (row.min_ns, row.max_ns)
        for ours_v, col in ((row.time_pct, "Time (%)"), (row.avg_ns, "Avg (ns)"), (row.med_ns, "Med (ns)")):
            assert abs(ours_v - float(t[col])) <= 0.05 + 1e-9, col
        assert abs(row.stddev_ns - float(t["StdDev (ns)"])) <= 0.05 + 1e-6
