"""Crashes are results: a worker that raises, aborts or segfaults, or a framework that rejects what it
is asked to do, ends as a `failed` run whose run.json carries the framework's own last error lines."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tracer.core.runfolder import RunFolder

QUICK = ("--model", "mobilenet_v2", "--limit", "4", "--batch", "4", "--threads", "1")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("framework", "fault", "signal", "tail", "cause"),
    [
        (
            "mxnet",
            "raise@1",
            None,
            "RuntimeError: injected fault at epoch 1",
            "RuntimeError: injected fault at epoch 1",
        ),
        ("paddle", "abort@1", "SIGABRT", "injected abort at epoch 1", "worker crashed with SIGABRT"),
        ("tensorflow", "segv@1", "SIGSEGV", "injected segfault at epoch 1", "worker crashed with SIGSEGV"),
        # JAX: an abort after build (the init function compiled, XLA's threads alive).
        ("jax", "abort@1", "SIGABRT", "injected abort at epoch 1", "worker crashed with SIGABRT"),
        # MXNet catches SIGSEGV itself, prints its own line and exits 255: still a failed run, in its words.
        ("mxnet", "segv@1", None, "Segmentation fault: 11", "worker exited with code 255: Segmentation fault: 11"),
    ],
)
def test_injected_crash_is_a_failed_run(
    framework: str, fault: str, signal: str | None, tail: str, cause: str, make_run: Callable[..., RunFolder]
) -> None:
    folder = make_run(framework, *QUICK, "--inject-fault", fault, expect_ok=False)
    record = folder.read_record()
    outcome = record.outcome
    assert outcome.status.value == "failed"
    assert outcome.signal == signal
    assert cause in outcome.cause
    assert any(tail in line for line in outcome.stderr_tail), outcome.stderr_tail
    assert record.model is not None and record.model.trainable_params > 0  # what happened before is kept
    process = folder.samples("process")
    assert process is not None and process.num_rows >= 1
