"""Tiny real training runs through `tracer profile` for TensorFlow, MXNet and PaddlePaddle.

Each run also sets every knob its framework maps, so one run checks both training and the knob record.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder

# --limit 8, batch 4: two steps per epoch; MobileNetV2 is the cheapest of the four models on 2 cores.
SMALL = ("--model", "mobilenet_v2", "--limit", "8", "--batch", "4", "--threads", "1")

CASES = {
    "tensorflow": (
        ("--workers", "2", "--prefetch", "2"),
        {
            "tf.data.map.num_parallel_calls": 2,
            "tf.data.prefetch.buffer_size": 4,  # --prefetch is per loader worker, as torch's prefetch_factor
            "tf.config.threading.intra_op_parallelism_threads": 1,
        },
        "tensorflow",
    ),
    "mxnet": (
        ("--workers", "1", "--prefetch", "2"),
        {"gluon.data.DataLoader.num_workers": 1, "gluon.data.DataLoader.prefetch": 2, "MXSetNumOMPThreads": 1},
        "mxnet",
    ),
    "paddle": (
        ("--workers", "1", "--prefetch", "2"),
        {
            "paddle.io.DataLoader.num_workers": 1,
            "paddle.io.DataLoader.prefetch_factor": 2,
            "paddle.base.core.set_num_threads": 1,
        },
        "paddlepaddle",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("framework", sorted(CASES))
def test_tiny_run_ends_ok(framework: str, make_run: Callable[..., RunFolder]) -> None:
    extra, knobs, version_key = CASES[framework]
    folder = make_run(framework, *SMALL, *extra)
    record = folder.read_record()
    assert record.outcome.status.value == "ok", record.outcome
    epochs = folder.epochs()
    assert [e.epoch for e in epochs] == [1, 2]
    assert all(e.images == 8 and e.end_ns > e.start_ns and e.loss > 0 for e in epochs)
    assert record.model is not None
    assert abs(record.model.trainable_params - 2227715) / 2227715 < 0.01
    assert record.model.total_params > record.model.trainable_params  # BatchNorm running statistics
    process = folder.samples("process")
    assert process is not None and process.num_rows >= 3
    assert record.environment.framework_versions[version_key]
    for key, value in knobs.items():
        assert record.knobs[key] == value, (key, record.knobs)


@pytest.mark.slow
def test_a_knob_for_another_framework_is_refused_before_the_run(tmp_path: Path) -> None:
    """The option declaration says which frameworks take a knob, so the CLI refuses it in one line
    (it used to reach the worker and end as a failed run)."""
    result = run_tracer(
        "profile",
        "--framework",
        "paddle",
        *SMALL,
        "--dataset",
        "small",
        "--gpu-thread-mode",
        "gpu_private",
        "--out",
        str(tmp_path),
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--gpu-thread-mode applies to tensorflow only" in result.stderr
    assert not list(tmp_path.iterdir())
