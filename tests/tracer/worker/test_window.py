"""The trace window's gate in the worker: tracers start and stop at the window's edges, every edge is an
event, and a tracer that fails at a later edge loses its trace, not the training (issue 29)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tracer.core.runfolder import read_jsonl
from tracer.core.schema import NVTX_WINDOW_RANGE, WINDOW_CLOSE, WINDOW_EDGE, WINDOW_OPEN, Event
from tracer.core.window import parse
from tracer.worker.reporting import Reporter
from tracer.worker.window import Gate, NvtxCapture


class Recorder:
    """A tracer that notes when it was started and stopped, between the events the gate writes."""

    def __init__(self, log: list[str], fail_start: bool = False) -> None:
        self.log = log
        self.fail_start = fail_start

    def start(self) -> None:
        if self.fail_start:
            raise RuntimeError("cannot start")
        self.log.append("start")

    def stop(self) -> None:
        self.log.append("stop")


def _drive(gate: Gate, log: list[str], epochs: int = 3, steps: int = 4) -> None:
    """What tracer/worker/main.py and base.run_epoch tell the gate, in their order."""
    gate.run_start()
    for epoch in range(1, epochs + 1):
        gate.epoch_start(epoch)
        log.append(f"epoch {epoch}")
        for step in range(steps):
            gate.step_start(epoch, step)
            log.append(f"{epoch}:{step}")
            gate.step_end(epoch, step)
        gate.epoch_end(epoch)
    gate.run_end()


def _gate(tmp_path: Path, text: str | None) -> tuple[Gate, Reporter]:
    window = parse(text)
    reporter = Reporter(str(tmp_path / "events.jsonl"))
    return Gate(window.worker_bounds() if window else None, reporter), reporter


def _edges(tmp_path: Path) -> list[tuple[str, Any]]:
    return [
        (e["kind"], e.get(WINDOW_EDGE) or e.get("error"))
        for e in read_jsonl(tmp_path / "events.jsonl")
        if e["kind"] in (Event.TRACE_WINDOW, Event.TRACE_ERROR)
    ]


@pytest.mark.parametrize(
    ("text", "traced"),
    [
        ("2", ["epoch 2", "2:0", "2:1", "2:2", "2:3"]),
        ("2-3", ["epoch 2", "2:0", "2:1", "2:2", "2:3", "epoch 3", "3:0", "3:1", "3:2", "3:3"]),
        ("2:1-2", ["2:1", "2:2"]),
        ("3:2-9", ["3:2", "3:3"]),  # a step range past the epoch's end closes with the epoch
    ],
)
def test_tracers_run_exactly_inside_the_window(tmp_path: Path, text: str, traced: list[str]) -> None:
    gate, reporter = _gate(tmp_path, text)
    log: list[str] = []
    gate.add(Recorder(log))
    _drive(gate, log)
    reporter.close()
    assert log[log.index("start") + 1 : log.index("stop")] == traced
    assert log.count("start") == log.count("stop") == 1
    assert _edges(tmp_path) == [(Event.TRACE_WINDOW, WINDOW_OPEN), (Event.TRACE_WINDOW, WINDOW_CLOSE)]


def test_whole_run_window_opens_before_the_first_epoch_and_a_failure_there_fails_the_run(tmp_path: Path) -> None:
    gate, reporter = _gate(tmp_path, "all")
    log: list[str] = []
    gate.add(Recorder(log))
    _drive(gate, log, epochs=1, steps=1)
    reporter.close()
    assert log == ["start", "epoch 1", "1:0", "stop"]
    assert _edges(tmp_path) == [], "a whole run has no window edges to tell"
    failing, _ = _gate(tmp_path, None)
    failing.add(Recorder([], fail_start=True))
    with pytest.raises(RuntimeError, match="cannot start"):
        failing.run_start()  # main.py turns this into exit code 4, as before windows


def test_a_tracer_that_cannot_start_at_a_later_window_costs_its_trace_not_the_run(tmp_path: Path) -> None:
    gate, reporter = _gate(tmp_path, "2")
    log: list[str] = []
    gate.add(Recorder(log, fail_start=True))
    _drive(gate, log)
    reporter.close()
    assert "epoch 3" in log and "start" not in log and "stop" not in log
    kinds = [k for k, _ in _edges(tmp_path)]
    assert kinds == [Event.TRACE_ERROR, Event.TRACE_WINDOW, Event.TRACE_WINDOW]
    assert "cannot start the trace at the window" in _edges(tmp_path)[0][1]


def test_steps_past_the_epoch_end_trace_nothing_and_say_so(tmp_path: Path) -> None:
    gate, reporter = _gate(tmp_path, "2:10-20")
    log: list[str] = []
    gate.add(Recorder(log))
    _drive(gate, log)
    reporter.close()
    assert "start" not in log
    ((kind, said),) = _edges(tmp_path)
    assert kind == Event.TRACE_ERROR and "epoch 2 has steps 0-3 only" in said


def test_a_run_that_ends_inside_its_window_closes_it(tmp_path: Path) -> None:
    gate, reporter = _gate(tmp_path, "2-3")
    log: list[str] = []
    gate.add(Recorder(log))
    gate.run_start()
    gate.epoch_start(1)
    gate.epoch_end(1)
    gate.epoch_start(2)  # ... and the framework raises in epoch 2
    gate.run_end()
    gate.run_end()
    assert log == ["start", "stop"]


class FakeNvtx:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.calls: list[str] = []

    def push(self, name: str) -> None:
        self.calls.append(f"push {name}")

    def pop(self) -> None:
        self.calls.append("pop")


def test_nsys_capture_range_is_one_nvtx_range_around_the_window(tmp_path: Path) -> None:
    gate, reporter = _gate(tmp_path, "2")
    nvtx = FakeNvtx(enabled=True)
    gate.add(NvtxCapture(lambda: nvtx))
    _drive(gate, [])
    assert nvtx.calls == [f"push {NVTX_WINDOW_RANGE}", "pop"]
    quiet, reporter = _gate(tmp_path, "2")
    quiet.add(NvtxCapture(lambda: FakeNvtx(enabled=False)))
    _drive(quiet, [])
    reporter.close()
    errors = [said for kind, said in _edges(tmp_path) if kind == Event.TRACE_ERROR]
    assert errors and "no NVTX library" in errors[0]
