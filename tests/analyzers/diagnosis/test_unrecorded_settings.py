"""Issue 56, item 25: a setting no one recorded is never shown as 0 in a verdict's evidence. A real Kineto
trace (PyTorch 1.9 profiler, 2021: steps with their DataLoader waits, no record of the loader's workers) imported
and diagnosed by real `tracer` processes."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_tracer
from tracer.core.runfolder import list_runs


def test_25_an_imported_traces_loader_workers_are_not_shown_as_0(real_fixtures: Path, tmp_path: Path) -> None:
    trace = real_fixtures / "kineto-2021" / "worker0.1623143089861.pt.trace.json.gz"
    out = tmp_path / "runs"
    assert run_tracer("import", "--out", str(out), str(trace)).returncode == 0
    (run,) = list_runs(out)
    diagnosed = run_tracer("diagnose", str(run.path))
    assert diagnosed.returncode == 0, diagnosed.stderr[-2000:]
    assert "data wait" in diagnosed.stdout  # the input-bound verdict, with its evidence, is there
    assert "loader workers 0" not in diagnosed.stdout
    assert "loader workers not measured" in diagnosed.stdout
