"""The imported H100 ResNet-18 nsys trace: the start-up and synchronisation shares the diagnosis
reports equal what plain SQL over the SQLite file gives."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from analyzers.diagnosis import diagnose
from tests.analyzers.diagnosis.conftest import NSYS_FIXTURE
from tracer.core.runfolder import RunFolder

SYNC_SQL = """
SELECT sum(CASE WHEN s.value GLOB 'cudaStreamSynchronize*' OR s.value GLOB 'cudaDeviceSynchronize*'
               OR s.value GLOB 'cudaEventSynchronize*' OR s.value GLOB 'cuStreamSynchronize*'
               OR s.value GLOB 'cuCtxSynchronize*' OR s.value GLOB 'cuEventSynchronize*'
           THEN r.end - r.start ELSE 0 END) * 100.0 / sum(r.end - r.start)
FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
"""
# start-up of a trace without epochs (analyzers.figures.phases): the first CUDA API call to the start of the
# second `step…` NVTX range (the first step is the warm-up), over the calls' span
STARTUP_SQL = """
SELECT ((SELECT n.start FROM NVTX_EVENTS n WHERE n.text GLOB 'step*' ORDER BY n.start LIMIT 1 OFFSET 1)
        - min(start)) * 100.0 / (max(end) - min(start))
FROM CUPTI_ACTIVITY_KIND_RUNTIME
"""


def _sql(path: Path, query: str) -> float:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return float(db.execute(query).fetchone()[0])


def test_startup_and_sync_shares_equal_sql_over_the_file(imported_nsys: RunFolder, real_fixtures: Path) -> None:
    path = real_fixtures / NSYS_FIXTURE
    verdicts = {v.rule: v for v in diagnose(imported_nsys)}
    startup, sync = verdicts["startup-heavy"], verdicts["sync-dominated"]
    assert startup.value == pytest.approx(_sql(path, STARTUP_SQL), rel=1e-9)
    assert sync.value == pytest.approx(_sql(path, SYNC_SQL), rel=1e-9)
    assert startup.fired  # half the traced span before the steady steps start
    assert not sync.fired  # 0.2 %: PyTorch's caching allocator and async launches


def test_launch_bound_on_the_real_trace(imported_nsys: RunFolder, real_fixtures: Path) -> None:
    """ResNet-18 at this batch: 2220 kernels of ~5 µs median, launches cost more than the kernels."""
    with sqlite3.connect(f"file:{real_fixtures / NSYS_FIXTURE}?mode=ro", uri=True) as db:
        kernel_ns = db.execute("SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        launch_ns = db.execute(
            "SELECT sum(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
            "WHERE s.value GLOB 'cudaLaunchKernel*' OR s.value GLOB 'cuLaunchKernel*'"
        ).fetchone()[0]
    v = next(v for v in diagnose(imported_nsys) if v.rule == "launch-bound")
    assert v.fired and v.value == pytest.approx(launch_ns / kernel_ns, rel=1e-9)
    # The tracer did not train this run: the advice names the training's own batch size, no tracer option.
    assert "a larger batch size" in v.knob and "--" not in v.knob, v.knob


def test_no_steady_cudamalloc_in_the_real_trace(imported_nsys: RunFolder) -> None:
    v = next(v for v in diagnose(imported_nsys) if v.rule == "allocator-churn")
    assert v.measured and not v.fired and v.value == 0
