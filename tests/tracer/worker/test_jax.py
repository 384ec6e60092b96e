"""JAX (Flax, optax, grain): tiny real runs of all four models through `tracer profile`, with the
compile time recorded as its own events, the knobs mapped or refused, and a crash recorded."""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from analyzers.figures.run_summary import summarise
from tests.conftest import require_framework, run_tracer
from tests.tracer.worker.helpers import assert_steps_add_up
from tracer.core.runfolder import RunFolder
from tracer.core.schema import Event
from tracer.worker.workload import REFERENCE_PARAMS

COMPILE = Event.COMPILE

# The brief's tiny settings: 16 images, 64 px, batch 4, 2 epochs (4 steps each).
TINY_JAX = ("--limit", "16", "--image-size", "64", "--epochs", "2", "--batch", "4", "--threads", "1")


def events(folder: RunFolder, kind: str) -> list[dict[str, Any]]:
    return [e for e in folder.events() if e["kind"] == kind]


@pytest.fixture(scope="module")
def model_runs(make_run: Callable[..., RunFolder]) -> dict[str, RunFolder]:
    """One tiny run per model, two at a time (XLA compiles on one thread; nothing here is timed against
    another run). All made before the first test: the child guard ends what a test leaves running."""
    with ThreadPoolExecutor(2) as pool:
        runs = {m: pool.submit(make_run, "jax", "--model", m, *TINY_JAX) for m in sorted(REFERENCE_PARAMS)}
        return {m: future.result() for m, future in runs.items()}


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(REFERENCE_PARAMS))
def test_tiny_run_ends_ok_with_compile_events(model: str, model_runs: dict[str, RunFolder]) -> None:
    folder = model_runs[model]
    record = folder.read_record()
    assert record.outcome.status.value == "ok", record.outcome
    epochs = folder.epochs()
    assert [e.epoch for e in epochs] == [1, 2]
    losses = [e.loss for e in epochs]
    assert all(e.images == 16 and math.isfinite(e.loss) and e.loss > 0 for e in epochs), losses
    assert losses[0] != losses[1]
    assert record.model is not None and record.model.trainable_params == REFERENCE_PARAMS[model]
    assert record.environment.framework_versions["jax"]
    assert record.knobs["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    compiles = events(folder, COMPILE)
    # init once, then the train step once: every batch has the same shape (16 = 4 x 4).
    assert [(c["function"], c["state"]) for c in compiles] == [
        ("init", "start"),
        ("init", "end"),
        ("train_step", "start"),
        ("train_step", "end"),
    ]
    step_end = compiles[3]
    assert step_end["batch_shape"] == [4, 64, 64, 3]
    assert 0 < float(step_end["seconds"]) < (epochs[0].end_ns - epochs[0].start_ns) / 1e9
    assert epochs[0].start_ns < int(compiles[2]["t_ns"]) < epochs[0].end_ns
    # `tracer show` reports the compile time apart from the epoch times.
    assert summarise(folder).compile_s == pytest.approx(float(compiles[1]["seconds"]) + float(step_end["seconds"]))
    assert_steps_add_up(folder, epochs=2, images=16, batch=4)  # the compile is step 0's compute


@pytest.mark.slow
def test_knobs_map_to_grain_and_bfloat16(make_run: Callable[..., RunFolder]) -> None:
    folder = make_run(
        "jax", "--model", "alexnet", *TINY_JAX, "--limit", "5", "--workers", "2", "--prefetch", "3", "--amp"
    )
    record = folder.read_record()
    assert record.outcome.status.value == "ok", record.outcome
    assert record.knobs["grain.MultiprocessingOptions.num_workers"] == 2  # processes, each its own decoder
    assert record.knobs["grain.MultiprocessingOptions.per_worker_buffer_size"] == 3
    assert record.knobs["grain.ReadOptions.num_threads"] == 0  # no reader threads inside a process
    assert record.knobs["compute_dtype"] == "bfloat16" and record.knobs["param_dtype"] == "float32"
    assert all(math.isfinite(e.loss) and e.images == 5 for e in folder.epochs())
    # 5 images in batches of 4: a last batch of 1 is a new shape, compiled (and reported) once.
    shapes = [c["batch_shape"][0] for c in events(folder, COMPILE) if c["state"] == "end"]
    assert shapes == [1, 4, 1]


@pytest.mark.slow
def test_gpu_thread_mode_is_refused_with_the_reason(tmp_path: Path) -> None:
    """The option declaration says --gpu-thread-mode is TensorFlow's: refused before any run starts."""
    args = ("--framework", "jax", "--model", "alexnet", "--dataset", "small", "--gpu-thread-mode", "gpu_private")
    result = run_tracer("profile", *args, "--out", str(tmp_path))
    assert result.returncode == 2 and "--gpu-thread-mode applies to tensorflow only" in result.stderr
    assert not list(tmp_path.iterdir())


def test_torch_trace_is_refused_in_one_line(tmp_path: Path) -> None:
    require_framework("jax")
    result = run_tracer(
        "profile",
        "--framework",
        "jax",
        "--model",
        "alexnet",
        "--dataset",
        "small",
        "--trace",
        "torch",
        "--out",
        str(tmp_path),
    )
    assert result.returncode == 2
    assert (
        "--trace torch is the PyTorch profiler: it traces --framework pytorch only, not --framework jax"
        in result.stderr
    )
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.iterdir())
