"""The nsys ingest streams: a file twice as long does not raise peak memory by more than a small
constant. Each ingest runs in a child process of its own and reports its peak RSS (ru_maxrss), so
the libraries' own footprint is the same on both sides and only what grows with the rows shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from tests.analyzers.nsys_replica import replicate

FIXTURE = "extra-p/con_kernel.sqlite"
SLACK_MB = 16
"""Allowed growth from 200 k to 400 k rows. Held in memory, 200 k more rows cost about 40 MB (the
in-memory `read_sqlite` measured 179 -> 217 MB on the development VM, 23 Nov 2026)."""

CHILD = """
import resource, sys
from pathlib import Path
from analyzers.ingest.pipeline import ingest_file
from tracer.core.runfolder import RunFolder
ingest_file(Path(sys.argv[1]), RunFolder(Path(sys.argv[2])))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_mb(sqlite: Path, out: Path) -> float:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(sqlite), str(out)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    return int(proc.stdout.strip().splitlines()[-1]) / 1024


def test_twice_the_rows_same_peak_memory(real_fixtures: Path, tmp_path: Path) -> None:
    peaks = {}
    for rows in (200_000, 400_000):
        sqlite = replicate(real_fixtures / FIXTURE, tmp_path / f"con_{rows}.sqlite", rows)
        out = tmp_path / f"run_{rows}"
        peaks[rows] = _peak_mb(sqlite, out)
        assert pq.ParquetFile(out / "cuda_api.parquet").metadata.num_rows == rows
    assert peaks[400_000] - peaks[200_000] < SLACK_MB, peaks
