"""The viewer shows a run's damaged files (`analyzers.run.Run.problems`) as problem lines in its banner,
and draws the rest of the run."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

CF98 = "gpu-h100/20261125-001043-pytorch-alexnet-big-gpu-b100-cf98"  # a real traced H100 run, 2 MB


def test_a_damaged_table_is_a_problem_line_and_the_rest_is_drawn(
    real_fixtures: Path, tmp_path: Path, open_window: Callable[..., object]
) -> None:
    run = Path(shutil.copytree(real_fixtures / CF98, tmp_path / Path(CF98).name))
    gpu = run / "samples" / "gpu.parquet"
    gpu.write_bytes(os.urandom(4096))
    window = open_window([run])
    (data,) = window.runs  # type: ignore[attr-defined]
    problems = [m for m in data.messages if str(gpu) in m]
    assert len(problems) == 1 and "is damaged" in problems[0], data.messages
    assert str(gpu) in window.messages()  # type: ignore[attr-defined]
    assert data.series["cpu_pct"] and "gpu_util_pct" not in data.series  # the process samples are drawn
    assert data.lanes.api_calls is not None and data.kernels and len(data.epochs) == 2  # and the trace


def test_the_run_browser_shows_the_rows_of_tracer_runs(real_fixtures: Path, tmp_path: Path) -> None:
    from analyzers.run.run import Run
    from analyzers.summaries.run_rows import RUNS_HEADERS, run_row
    from viewer.browser import PICKED, STATUS, browse

    run = Path(shutil.copytree(real_fixtures / CF98, tmp_path / Path(CF98).name))
    (run / "samples" / "gpu.parquet").write_bytes(os.urandom(4096))
    (row,) = browse(tmp_path)
    cells = run_row(Run.open(run))
    expected = [cells[RUNS_HEADERS.index(c)] for c in PICKED]
    assert row[STATUS] == expected[STATUS] + ", damaged: gpu.parquet"
    shown = row[: len(PICKED)]
    assert [c for i, c in enumerate(shown) if i != STATUS] == [c for i, c in enumerate(expected) if i != STATUS]
    assert row[-2] == cells[RUNS_HEADERS.index("id")] and row[-1] == str(run)
