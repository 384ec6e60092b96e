"""The gate's judgement on the real H100 runs (tests/data/fixtures/gpu-h100): a change past its threshold
but inside the noise is no regression, a contended side's times are not judged while its memory is, and a
run against itself changes nothing. (`tests/tracer/cli/test_gate.py` gates real PyTorch profiler traces.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analyzers.comparison.gate import (
    IMPROVED,
    NOT_COMPARED,
    NOT_JUDGED,
    NOT_MEASURED,
    REGRESSED,
    WITHIN_NOISE,
    WITHIN_THRESHOLD,
    gate,
    thresholds,
)
from analyzers.comparison.gate_metrics import GATE_METRICS
from analyzers.figures.contention import CONTENDED_OTHER_CPU_PCT
from analyzers.figures.noise import REPEATS_DISAGREE
from tests.conftest import run_tracer
from tracer.core import schema
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder

B100 = "20261125-000159-pytorch-alexnet-big-gpu-b100-85cf"  # untraced, steady epochs 4.72 and 4.83 s
CUPTI = "20261125-001502-pytorch-alexnet-big-gpu-b100-a266"  # one steady epoch, 4.68 s
TORCH = "20261125-001123-pytorch-alexnet-big-gpu-b100-a9b3"  # one steady epoch, 4.96 s
B1_300 = "20261125-002513-pytorch-alexnet-big-gpu-b1-6573"  # batch 1, --limit 300: 4.3 ms a step


def _run(real_fixtures: Path, name: str) -> RunFolder:
    return RunFolder(real_fixtures / "gpu-h100" / name)


def _states(result: object) -> dict[str, str]:
    return {j.metric.key: j.state for j in result.judgements}  # type: ignore[attr-defined]


def test_a_run_against_itself_changes_nothing(real_fixtures: Path) -> None:
    run = _run(real_fixtures, TORCH)
    result = gate([run], [run])
    assert not result.failed and result.reason == ("the baseline and the candidate are one run",)
    measured = [j for j in result.judgements if j.state != NOT_MEASURED]
    assert {j.metric.key for j in measured} >= {"data_wait", "step_time", "epoch_time", "cuda_api", "gpu_util"}
    assert all(j.state == WITHIN_THRESHOLD and j.change == 0 for j in measured)


def test_a_change_past_its_threshold_inside_the_noise_is_no_regression(real_fixtures: Path) -> None:
    """The torch-traced run's steady step is 5.9 % slower per image than the CUPTI-traced one's, past the 5 %
    threshold; but the blocks of each run's steps overlap (0.68-0.84 ms against 0.70-0.88 ms), and with one
    steady epoch each, the epoch time's range is its steps' blocks, scaled."""
    result = gate([_run(real_fixtures, CUPTI)], [_run(real_fixtures, TORCH)])
    judged = {j.metric.key: j for j in result.judgements}
    for key in ("step_time", "epoch_time", "images_per_s"):
        j = judged[key]
        assert j.change is not None and j.change > j.threshold and j.state == WITHIN_NOISE, j
        assert j.baseline is not None and j.baseline.spread.low < j.baseline.value < j.baseline.spread.high
    assert judged["step_time"].why == "blocks of steps overlap"
    # Peak RSS is one figure a side (no range): past its 10 % it regressed, and is named with diff's reason.
    assert [j.metric.key for j in result.regressions] == ["peak_rss"]
    assert any("per image" in s for s in result.reason)


def test_a_slower_step_beyond_noise_regresses_and_unlike_epochs_are_not_compared(real_fixtures: Path) -> None:
    result = gate([_run(real_fixtures, B100)], [_run(real_fixtures, B1_300)])
    states = _states(result)
    assert states["step_time"] == REGRESSED and states["images_per_s"] == REGRESSED
    assert [j.metric.key for j in result.regressions][0] == "step_time"  # 87 thresholds past, images/s 16
    assert states["data_wait"] == IMPROVED and states["gpu_memory"] == IMPROVED
    epoch = next(j for j in result.judgements if j.metric.key == "epoch_time")
    assert epoch.state == NOT_COMPARED and "6,003 images" in epoch.why and "300 images" in epoch.why
    # MFU needs no trace (AlexNet's model FLOPs over the H100's peak): 1.05 % at batch 100, 0.19 % at batch 1;
    # a consequence of the slower step, so it follows it. The CUDA API needs a trace: neither side has one.
    assert states["mfu"] == REGRESSED
    assert [j.metric.key for j in result.regressions] == ["step_time", "images_per_s", "mfu"]
    assert states["cuda_api"] == NOT_MEASURED


def _contended_copy(run: RunFolder, where: Path) -> RunFolder:
    """The run with its process samples changed so that other processes held the CPU while it trained."""
    copy = RunFolder(Path(shutil.copytree(run.path, where / run.path.name)))
    path = copy.sample_parquet_path(schema.PROCESS.name)
    table = pq.read_table(path)
    own = table.column(schema.CPU_PCT).to_pylist()
    machine = pa.array([(x or 0.0) + 2 * CONTENDED_OTHER_CPU_PCT for x in own], pa.float64())
    index = table.column_names.index(schema.SYS_CPU_PCT)
    pq.write_table(table.set_column(index, schema.SYS_CPU_PCT, machine.cast(table.schema.field(index).type)), path)
    return copy


def test_a_contended_side_s_times_are_not_judged_its_memory_is(real_fixtures: Path, tmp_path: Path) -> None:
    busy = _contended_copy(_run(real_fixtures, B1_300), tmp_path)
    result = gate([_run(real_fixtures, B100)], [busy])
    states = _states(result)
    assert states["step_time"] == states["images_per_s"] == NOT_JUDGED
    assert next(j.why for j in result.judgements if j.metric.key == "step_time") == "contended"
    assert states["gpu_memory"] == IMPROVED  # memory does not depend on the machine's load
    assert not result.failed


def test_repeats_that_disagree_are_not_judged(real_fixtures: Path) -> None:
    """A side of two runs five times apart per image (batch 100 and batch 1) disagrees: its range is wider
    than REPEATS_DISAGREE of its median, so its median stands for neither, and no change against it is judged."""
    b100, b1 = _run(real_fixtures, B100), _run(real_fixtures, B1_300)
    result = gate([b100, b1], [_run(real_fixtures, TORCH)])
    step = next(j for j in result.judgements if j.metric.key == "step_time")
    assert step.baseline is not None and step.baseline.over == "repeats"
    assert (step.baseline.spread.high - step.baseline.spread.low) / step.baseline.value > REPEATS_DISAGREE
    assert step.state == NOT_JUDGED and step.why == "repeats disagree"


def test_thresholds_are_the_declared_defaults_unless_given() -> None:
    assert thresholds() == {m.key: m.threshold for m in GATE_METRICS}
    assert thresholds({"step_time": 12.5})["step_time"] == 12.5
    with pytest.raises(UserError, match="no such metric"):
        thresholds({"steptime": 5})
    with pytest.raises(UserError, match="finite number"):
        thresholds({"step_time": float("nan")})


def test_nothing_measured_on_both_sides_is_bad_input(real_fixtures: Path) -> None:
    """An nsys export analysed in place has no steps and no samples: no metric to gate, one line, exit 2."""
    trace = real_fixtures / "nsys-h100" / "resnet18_train_nsys2025.3.1.sqlite"
    result = run_tracer("gate", "--baseline", str(trace), "--candidate", str(trace))
    assert result.returncode == 2 and result.stderr.startswith("tracer: error: nothing to gate"), result.stderr
