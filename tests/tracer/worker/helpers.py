"""Test helpers for framework tests."""

from __future__ import annotations

import math
import os
import subprocess

import pytest

from analyzers.figures import steps
from tests.conftest import framework_required, require_framework
from tracer.core.frameworks import FRAMEWORKS
from tracer.core.runfolder import RunFolder
from tracer.core.schema import STEP_COLUMNS, STEPS_TABLE
from tracer.measure.environments import env_python, find_python, status
from tracer.measure.process import worker_pythonpath


def run_in_framework(framework: str, code: str, *args: str, timeout: float = 600) -> str:
    """`python -c code args` in the framework's environment with the worker package importable (from
    `/`, so the checkout is not on the path by accident); its stdout, or the test fails with its stderr."""
    env = dict(os.environ, PYTHONPATH=str(worker_pythonpath()), TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [str(env_python(framework)), "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd="/",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def require_singa() -> None:
    """SINGA's only PyPI build needs a CPython 3.6: where none exists, skip saying so, unless CI demands
    SINGA (TRACER_REQUIRE_FRAMEWORKS names it: then fail, as for any framework)."""
    required = framework_required("singa")
    version = FRAMEWORKS["singa"].python_version
    if not status("singa").installed and not required and find_python(version) is None:
        pytest.skip(
            f"no CPython {version} here (python{version} on PATH or in pyenv's versions folder): SINGA needs it"
        )
    require_framework("singa")


WALL_TOLERANCE = 0.05
"""How far an epoch's data wait + compute + sync may be from its wall time (the time outside the loop)."""
WALL_SLACK_S = 0.010
"""And a few scheduler time slices more: the time outside the loop is a few ms of Python, which a loaded
2-core machine can stretch (CI of 28 Nov: 4.8 ms of a tiny 90 ms epoch, 5.3 %)."""


def assert_steps_add_up(folder: RunFolder, epochs: int, images: int, batch: int) -> None:
    """Issue 18's per-step table: one row per step of every epoch, each timed as data wait, compute and
    sync, adding up to the epoch's wall time."""
    assert folder.sample_parquet_path(STEPS_TABLE).exists()  # finalised from the worker's CSV
    table = folder.samples(STEPS_TABLE)
    assert table is not None
    assert tuple(table.column_names) == STEP_COLUMNS
    rows = table.to_pylist()
    per_epoch = math.ceil(images / batch)
    assert [(r["epoch"], r["step"]) for r in rows] == [(e, s) for e in range(1, epochs + 1) for s in range(per_epoch)]
    assert sum(r["images"] for r in rows) == epochs * images
    for epoch in folder.epochs():
        mine = [r for r in rows if r["epoch"] == epoch.epoch]
        assert all(r["data_wait_s"] >= 0 and r["compute_s"] > 0 and r["sync_s"] >= 0 for r in mine)
        assert epoch.start_ns <= mine[0]["start_ns"] <= mine[-1]["start_ns"] <= epoch.end_ns
        timed = sum(r["data_wait_s"] + r["compute_s"] + r["sync_s"] for r in mine)
        allowed = WALL_TOLERANCE * epoch.duration_s + WALL_SLACK_S
        assert abs(timed - epoch.duration_s) <= allowed, (timed, epoch.duration_s)
    splits = steps.epoch_splits(folder)
    assert [s.epoch for s in splits] == list(range(1, epochs + 1))
    assert all(s.data_wait_share is not None and 0 <= s.data_wait_share < 1 for s in splits)
