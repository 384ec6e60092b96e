"""A user's SINGA script under `tracer profile --` trains on PyPI's wheel as the built-in worker does (issue
52 item 6): the probe mends the wheel's defects from the worker's own file (tracer/probe/singa_mend.py).
The same script fails alone on that wheel (the defect is real), trains under the tracer, and its steps and
losses are the script's own."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import require_framework, run_tracer
from tracer.core.runfolder import list_runs
from tracer.core.schema import Probe
from tracer.measure.environments import status
from tracer.probe.singa_mend import MENDED_KEY

SCRIPT = Path(__file__).resolve().parent / "scripts" / "singa_loop.py"


def test_a_users_singa_script_trains_on_the_mended_wheel(tmp_path: Path) -> None:
    require_framework("singa")
    python = status("singa").python
    alone = subprocess.run([python, str(SCRIPT)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    wheel_defective = alone.returncode != 0
    if wheel_defective:  # PyPI's 3.0.0.dev1: the NumPy copy the tutorial's first tensor needs
        assert "CopyFloatDataFromHostPtr" in alone.stderr, alone.stderr[-2000:]
    result = run_tracer("profile", "--out", str(tmp_path / "runs"), "--", python, str(SCRIPT))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "trained 8 steps in 2 epochs" in result.stdout
    losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", result.stdout)]
    assert len(losses) == 8 and all(0 < v < 10 for v in losses)
    (folder,) = list_runs(tmp_path / "runs")
    record = folder.read_record()
    assert record.measurement.framework == "singa"
    mended = record.environment.framework_versions.get(MENDED_KEY, "")
    assert ("numpy copies" in mended) == wheel_defective, mended
    steps = folder.samples("steps")
    assert steps is not None and steps.num_rows == 8  # the script's own 8 steps, in its 2 epochs
    assert sorted(set(steps.column("epoch").to_pylist())) == [1, 2]


def test_an_unmarked_singa_loop_counts_each_optimizer_call_as_a_step(tmp_path: Path) -> None:
    """Without the marker the probe sees SINGA's `optimizer(loss)` calls (`singa.opt`): each one a step, the
    first too, all in one epoch, with no data wait or samples made up."""
    require_framework("singa")
    python = status("singa").python
    result = run_tracer("profile", "--out", str(tmp_path / "runs"), "--", python, str(SCRIPT), "--no-marker")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "trained 8 steps in 2 epochs" in result.stdout
    (folder,) = list_runs(tmp_path / "runs")
    steps = folder.samples("steps")
    assert steps is not None and steps.num_rows == 8
    assert set(steps.column("probe").to_pylist()) == {Probe.SINGA_OPTIMIZER}
    assert set(steps.column("epoch").to_pylist()) == {1}
    assert steps.column("data_wait_s").null_count == 8 and steps.column("images").null_count == 8
