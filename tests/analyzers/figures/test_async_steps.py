"""Asynchronous frameworks (analyzers.figures.steps): a step's compute is the step minus its data wait, wherever the
framework blocks. JAX dispatches asynchronously even on a CPU (its step returns at once and the loop waits
at the loss read), PyTorch computes synchronously; on tiny real CPU runs of both, the compute the viewer
and the notebook show is never below the step time minus the data wait by more than 10 %, and the step
panels draw each step over its own duration (no line across a pause)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from analyzers.figures.steps import COMPUTE_TOTAL_S, STEP_S
from analyzers.report.notebook import load_runs
from tests.conftest import require_framework
from tracer.core import schema
from tracer.core.runfolder import RunFolder
from viewer.data import load_run, step_shape

TINY_JAX = ("--limit", "16", "--image-size", "64", "--epochs", "2", "--batch", "4", "--threads", "1")


@pytest.fixture(scope="module")
def jax_run(make_run: Callable[..., RunFolder]) -> RunFolder:
    require_framework("jax")
    return make_run("jax", "--model", "alexnet", *TINY_JAX)


@pytest.mark.parametrize("which", ["jax", "pytorch"])
def test_compute_is_the_step_minus_its_data_wait(
    which: str, request: pytest.FixtureRequest, tiny_pytorch_run: RunFolder
) -> None:
    folder = request.getfixturevalue("jax_run") if which == "jax" else tiny_pytorch_run
    table = folder.samples(schema.STEPS_TABLE)
    assert table is not None and table.num_rows > 0
    wait = np.asarray(table.column(schema.DATA_WAIT_S).to_pylist())
    step = (
        wait
        + np.asarray(table.column(schema.COMPUTE_S).to_pylist())
        + np.asarray(table.column(schema.SYNC_S).to_pylist())
    )
    # the notebook's steps frame
    frame = load_runs(folder.path).steps
    assert np.all(frame[COMPUTE_TOTAL_S].to_numpy() >= 0.9 * (step - wait))
    assert frame[STEP_S].to_numpy() == pytest.approx(step)
    # the viewer's step panel: one flat line per step at the step's compute
    run = load_run(folder.path)
    (series,) = run.series["step_compute_s"]
    shown = series.y[~np.isnan(series.y)][::2]  # two points per step: its start and its end
    assert len(shown) == len(step)
    assert np.all(shown >= 0.9 * (step - wait)), (shown, step - wait)
    # over each epoch, compute and data wait add up to the epoch's wall time (5 %, the worker's own bound)
    for epoch in folder.epochs():
        mine = frame[frame.epoch == epoch.epoch]
        total = float((mine[COMPUTE_TOTAL_S] + mine[schema.DATA_WAIT_S]).sum())
        assert total == pytest.approx(epoch.duration_s, rel=0.05)


def test_the_step_panel_draws_each_step_over_its_duration() -> None:
    """A 10 s compile step is a flat line over its 10 s (not a diagonal to the next step's point), and the
    pause before the next epoch's steps is a gap."""
    start = np.array([0, 1, 11, 11.1, 20], dtype=np.float64) * 1e9
    took = np.array([1.0, 10.0, 0.1, 0.1, 0.1])
    x, y = step_shape(start.astype(np.int64), took, took)
    assert list(x[:4] / 1e9) == [0, 1, 1, 11]  # step 2 (10 s) from its start to its end at one height
    assert list(y[2:4]) == [10.0, 10.0]
    pause = int(np.flatnonzero(np.isnan(y))[0])
    assert x[pause] / 1e9 == pytest.approx(11.2) and x[pause + 1] / 1e9 == 20  # no line across 11.2-20 s
    assert np.all(np.diff(x) >= 0)
