"""`--trace-window`: its syntax, its checks against the run, and the default for long traced runs (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from tests.conftest import TINY, run_tracer
from tracer.core import options
from tracer.core.errors import UserError
from tracer.core.window import TraceWindow, parse, resolve
from tracer.measure.runner import Launch, Runner
from tracer.measure.tracing.base import TraceBackend


@pytest.mark.parametrize(
    ("text", "window", "label"),
    [
        ("2", TraceWindow(2, 2), "epoch 2"),
        ("2-3", TraceWindow(2, 3), "epochs 2-3"),
        (" 2 : 100 - 200 ", TraceWindow(2, 2, 100, 200), "epoch 2 steps 100-200"),
        ("ALL", None, ""),
    ],
)
def test_the_syntax(text: str, window: TraceWindow | None, label: str) -> None:
    assert parse(text) == window
    if window is not None:
        assert window.label == label and parse(window.text) == window


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("two", "'two' is not a trace window: give EPOCH"),
        ("3-2", "epochs count from 1 and the first comes before the last"),
        ("0", "epochs count from 1"),
        ("2-3:1-5", "a step range applies to one epoch"),
        ("2:9-1", "the first step comes before the last"),
    ],
)
def test_a_bad_window_is_refused_in_the_words_of_the_flag(text: str, words: str) -> None:
    with pytest.raises(UserError, match=f"^--trace-window: .*{words}"):
        options.validate_spec({"framework": "pytorch", "model": "alexnet", "dataset": "small", "trace_window": text})


def _spec(**kw: object) -> options.RunSpec:
    return options.validate_spec({"framework": "pytorch", "model": "alexnet", "dataset": "small", **kw})  # type: ignore[no-any-return]


def test_default_is_the_second_epoch_of_traced_runs_longer_than_three_epochs() -> None:
    assert resolve(_spec(epochs=100, trace="nsys")) == ("2", True)
    assert resolve(_spec(epochs=4, pyspy=True)) == ("2", True)
    assert resolve(_spec(epochs=3, trace="torch")) == ("all", False)
    assert resolve(_spec(epochs=100)) == (None, False)  # nothing traces: no window
    assert resolve(_spec(epochs=100, trace="nsys", trace_window="all")) == ("all", False)
    assert resolve(_spec(epochs=100, trace="nsys", trace_window="5:10-20")) == ("5:10-20", False)


def test_a_window_the_run_cannot_have_is_refused() -> None:
    with pytest.raises(UserError, match="names epoch 4, but the run has 3"):
        resolve(_spec(epochs=3, trace="nsys", trace_window="2-4"))
    with pytest.raises(UserError, match="give it with --trace"):
        resolve(_spec(epochs=3, trace_window="2"))


def test_the_runner_records_the_default_and_says_it_once(tmp_path: Path) -> None:
    console = Console(record=True, width=200)
    spec = _spec(epochs=10, trace="torch")
    runner = Runner(Launch(spec, None, tmp_path, tmp_path, TraceBackend()), console)  # type: ignore[arg-type]
    resolved = runner._with_window(spec)
    assert resolved.trace_window == "2" and runner.launch.spec.trace_window == "2"
    said = console.export_text()
    assert said.count("trace window: epoch 2 of 10") == 1 and "--trace-window all" in said
    assert options.worker_config(resolved)["trace_window"] == {
        "first_epoch": 2,
        "last_epoch": 2,
        "first_step": None,
        "last_step": None,
    }
    assert options.worker_config(_spec(trace="torch", trace_window="all"))["trace_window"] is None


def test_cli_refuses_a_bad_window_in_one_line(tmp_path: Path) -> None:
    result = run_tracer(
        "profile", "--framework", "pytorch", "--model", "alexnet", *TINY, "--trace-window", "2", "--out", str(tmp_path)
    )
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
    assert "--trace-window chooses what a trace records" in result.stderr
    assert not list(tmp_path.iterdir())
