"""tracer.measure.stall: what counts as progress (a growing file, CPU in the process tree), on real processes
with a stepped clock."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracer.measure.stall import CHECK_EVERY_S, StallWatch, tree_cpu_s


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _run(watch: StallWatch, clock: Clock, pid: int, seconds: float, each: object = None) -> bool:
    stalled = False
    for _ in range(int(seconds / CHECK_EVERY_S)):
        clock.now += CHECK_EVERY_S
        if callable(each):
            each()
        stalled = watch.check(pid)
    return stalled


def test_an_idle_process_tree_stalls_after_the_limit(sleeper: subprocess.Popen[bytes], tmp_path: Path) -> None:
    clock = Clock()
    events = tmp_path / "events.jsonl"
    events.write_text("")
    watch = StallWatch([events], 10, clock)
    assert not _run(watch, clock, sleeper.pid, 8)
    assert _run(watch, clock, sleeper.pid, 4)


def test_a_growing_event_stream_is_progress(sleeper: subprocess.Popen[bytes], tmp_path: Path) -> None:
    clock = Clock()
    events = tmp_path / "events.jsonl"
    events.write_text("")
    watch = StallWatch([events], 10, clock)

    def grow() -> None:
        with events.open("a") as f:
            f.write("{}\n")

    assert not _run(watch, clock, sleeper.pid, 40, grow)


def test_a_busy_process_is_progress_and_zero_switches_it_off(tmp_path: Path) -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        clock = Clock()
        watch = StallWatch([], 4, clock)
        start = tree_cpu_s(busy.pid)
        stalled = False
        for _ in range(4):  # real CPU time passes between checks: 1.5 s each, stepped clock 2 s
            clock.now += CHECK_EVERY_S
            subprocess.run([sys.executable, "-c", "import time; time.sleep(1.5)"], check=True)
            stalled = stalled or watch.check(busy.pid)
        assert tree_cpu_s(busy.pid) > start
        assert not stalled
        assert not StallWatch([], 0, clock).check(busy.pid)
    finally:
        busy.kill()
        busy.wait()
