"""SINGA (PyPI's 3.0.0.dev1 wheel on CPython 3.6) trains the study's models through `tracer profile`:
tiny real runs at the issue's settings, the MobileNetV2 refusal, and a crash recorded like any other."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.tracer.worker.helpers import assert_steps_add_up, require_singa
from tracer.core.runfolder import RunFolder
from tracer.worker.workload import REFERENCE_PARAMS

TINY_SINGA = ("--limit", "12", "--image-size", "64", "--batch", "4", "--epochs", "2")
TRAINED = ("alexnet", "resnet50", "vgg16")


@pytest.fixture(scope="module")
def singa_runs(make_run: Callable[..., RunFolder]) -> dict[str, RunFolder]:
    """The three runs side by side (SINGA keeps about one core busy; CI has two): nothing here is timed."""
    require_singa()
    with ThreadPoolExecutor(len(TRAINED)) as pool:
        futures = {model: pool.submit(make_run, "singa", "--model", model, *TINY_SINGA) for model in TRAINED}
        return {model: future.result() for model, future in futures.items()}


@pytest.mark.slow
@pytest.mark.parametrize("model", TRAINED)
def test_tiny_run_ends_ok_with_torchvision_parameter_count(model: str, singa_runs: dict[str, RunFolder]) -> None:
    folder = singa_runs[model]
    record = folder.read_record()
    assert record.outcome.status.value == "ok", record.outcome
    assert record.model is not None and record.model.trainable_params == REFERENCE_PARAMS[model]
    epochs = folder.epochs()
    assert [e.epoch for e in epochs] == [1, 2] and all(e.images == 12 and e.loss > 0 for e in epochs)
    assert record.environment.framework_versions["singa"] == "3.0.0.dev1"
    assert record.environment.worker_python_version.startswith("3.6.")
    mends = record.knobs["wheel defects mended (singa_patches)"]
    assert mends == "in-place division, numpy copies, batchnorm cpu training"
    assert_steps_add_up(folder, epochs=2, images=12, batch=4)


@pytest.mark.slow
def test_models_log_different_losses(singa_runs: dict[str, RunFolder]) -> None:
    """The adaptive-pool matrices made during `Model.compile` once stayed zero: every model then logged
    the same loss (the head saw only zeros)."""
    first_losses = {model: round(folder.epochs()[0].loss, 6) for model, folder in singa_runs.items()}
    assert len(set(first_losses.values())) == len(TRAINED), first_losses


@pytest.mark.slow
def test_mobilenet_v2_is_refused_with_singas_message(make_run: Callable[..., RunFolder]) -> None:
    require_singa()
    folder = make_run("singa", "--model", "mobilenet_v2", *TINY_SINGA, expect_ok=False)
    outcome = folder.read_record().outcome
    assert outcome.status.value == "failed" and outcome.exit_code == 1
    assert outcome.cause.startswith("ValueError: refused by SINGA 3.0.0.dev1")
    assert outcome.cause.endswith("Not implemented yet")
    assert folder.epochs() == []


@pytest.mark.slow
def test_injected_crash_is_a_failed_run(make_run: Callable[..., RunFolder]) -> None:
    require_singa()
    folder = make_run("singa", "--model", "alexnet", "--limit", "4", "--inject-fault", "segv@1", expect_ok=False)
    record = folder.read_record()
    assert record.outcome.status.value == "failed"
    assert record.outcome.signal == "SIGSEGV" and "worker crashed with SIGSEGV" in record.outcome.cause
    assert any("injected segfault at epoch 1" in line for line in record.outcome.stderr_tail)
    assert record.model is not None and record.model.trainable_params == REFERENCE_PARAMS["alexnet"]
    process = folder.samples("process")
    assert process is not None and process.num_rows >= 1
