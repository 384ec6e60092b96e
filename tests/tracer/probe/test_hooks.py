"""The probe's hooks in the frameworks other than PyTorch, each on a plain user script under
`tracer profile --` (tests/tracer/probe/scripts/): a Gluon DataLoader loop, a paddle.io.DataLoader loop,
paddle.Model.fit and a custom tf.data loop give their steps, epochs and loader settings with no edit."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.comparison.diff import diff
from analyzers.figures.step_part_names import DATA_WAIT, WAIT_UNSEEN_LABEL
from analyzers.render.marker import marker_lines
from tests.conftest import require_framework, run_tracer
from tracer.core.runfolder import RunFolder, list_runs
from tracer.core.schema import KIND, PROBE, STEPS_TABLE, Event, Probe
from tracer.measure.environments import status

SCRIPTS = Path(__file__).resolve().parent / "scripts"

# (framework, script and its arguments, the probe that must see the steps, loader settings it must report)
CASES = [
    ("mxnet", ("gluon_loop.py",), Probe.GLUON_DATALOADER, {"num_workers": 0}),
    ("paddle", ("paddle_loop.py",), Probe.PADDLE_DATALOADER, {"num_workers": 0}),
    ("paddle", ("paddle_loop.py", "fit"), Probe.PADDLE_FIT, {"batch_size": 8}),
    ("tensorflow", ("tf_data_loop.py",), Probe.TF_DATA, {"prefetch": True, "parallel_map": False}),
]


@pytest.mark.parametrize(("framework", "script", "probe", "knobs"), CASES, ids=[" ".join(c[1]) for c in CASES])
def test_a_plain_loop_gives_its_steps_epochs_and_loader_settings(
    framework: str, script: tuple[str, ...], probe: str, knobs: dict[str, object], tmp_path: Path
) -> None:
    require_framework(framework)
    out = tmp_path / "runs"
    name, *args = script
    result = run_tracer("profile", "--out", str(out), "--", status(framework).python, str(SCRIPTS / name), *args)
    assert result.returncode == 0, result.stderr[-3000:]
    (folder,) = list_runs(out)
    assert isinstance(folder, RunFolder)
    steps = folder.samples(STEPS_TABLE)
    assert steps is not None
    # 32 samples in batches of 8, two passes: four steps an epoch, each of 8 images, seen by that probe only.
    assert set(steps.column(PROBE).to_pylist()) == {probe}
    assert steps.column("epoch").to_pylist() == [1] * 4 + [2] * 4
    assert steps.column("images").to_pylist() == [8] * 8
    assert [e.epoch for e in folder.epochs()] == [1, 2]
    record = folder.read_record()
    assert record.command is not None and framework in record.command.frameworks_imported
    (loader,) = [e for e in folder.events() if e.get(KIND) == Event.LOADER]
    assert loader[PROBE] == probe and knobs.items() <= loader["knobs"].items()
    assert {f"{probe}.{key}": value for key, value in knobs.items()}.items() <= record.knobs.items()


# (framework, the probe that must count its updates, samples per step where the update says them)
UPDATES = [
    ("tensorflow", Probe.KERAS_OPTIMIZER, None),
    ("mxnet", Probe.MXNET_TRAINER, 8),
    ("paddle", Probe.PADDLE_OPTIMIZER, None),
    ("jax", Probe.OPTAX_UPDATE, None),  # optax's update outside jit
]


@pytest.mark.parametrize(("framework", "probe", "samples"), UPDATES, ids=[u[0] for u in UPDATES])
def test_a_loop_with_no_loader_counts_each_optimizer_update_as_a_step(
    framework: str, probe: str, samples: int | None, tmp_path: Path
) -> None:
    require_framework(framework)
    out = tmp_path / "runs"
    script = str(SCRIPTS / "optimizer_only.py")
    result = run_tracer("profile", "--out", str(out), "--", status(framework).python, script, framework)
    assert result.returncode == 0, result.stderr[-3000:]
    (folder,) = list_runs(out)
    assert isinstance(folder, RunFolder)
    steps = folder.samples(STEPS_TABLE)
    assert steps is not None and set(steps.column(PROBE).to_pylist()) == {probe}
    assert steps.num_rows == 8  # every update, the first one too
    assert steps.column("images").to_pylist() == [samples] * 8
    assert steps.column("data_wait_s").null_count == 8  # no batch seen fetched: not measured, not 0
    if samples:  # per image, `diff` does not split the step by a wait it did not see
        found = diff(folder, folder)
        assert DATA_WAIT not in [p.key for p in found.parts] and found.parts[0].label == WAIT_UNSEEN_LABEL
        assert "waiting for data" not in " ".join(found.sentences)


def test_an_optax_update_inside_jit_is_not_counted_and_the_marker_is_told(tmp_path: Path) -> None:
    """Inside jit optax's update is traced once, not run each step: no step is made up from it, and the
    run says how to mark the loop."""
    require_framework("jax")
    out = tmp_path / "runs"
    script = str(SCRIPTS / "optimizer_only.py")
    result = run_tracer("profile", "--out", str(out), "--", status("jax").python, script, "jax-jit")
    assert result.returncode == 0, result.stderr[-3000:]
    (folder,) = list_runs(out)
    steps = folder.samples(STEPS_TABLE)
    assert steps is None or steps.num_rows == 0
    first, second = marker_lines("jax")
    assert first in result.stderr and second in result.stderr
