"""Issue 27, items 9 and 1 (its `stalled` end): however signals arrive, and whenever a run stops moving,
the run folder ends final: run.json not `running`, samples converted to Parquet, the worker's temp
folder gone, no stray run.json.*.tmp.

Real `tracer profile` processes (PyTorch, tiny), real signals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import ctrl_c_reaches_python, require_framework
from tracer.core.schema import PROCESS, SAMPLES_DIR, STEPS, THREADS_TABLE
from tracer.measure.process import STALL_STACKS, WORKER_TMP_PREFIX

TINY = ["--model", "alexnet", "--dataset", "small", "--image-size", "64", "--limit", "16"]


def _start(out: Path, *extra: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "tracer", "profile", "--framework", "pytorch", *TINY, *extra, "--out", str(out)]
    with (out.parent / "tracer.log").open("wb") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=ctrl_c_reaches_python)


def _wait_for(predicate: object, within: float, tracer: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and tracer.poll() is None:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError(f"not seen within {within} s")


def _events(out: Path) -> str:
    found = list(out.glob("*/events.jsonl"))
    return found[0].read_text() if found else ""


def _worker_tmpdirs(tracer: subprocess.Popen[bytes]) -> set[str]:
    dirs = set()
    try:
        for child in psutil.Process(tracer.pid).children(recursive=True):
            tmp = child.environ().get("TMPDIR", "")
            if WORKER_TMP_PREFIX in tmp:
                dirs.add(tmp)
    except psutil.Error:
        pass
    return dirs


def _assert_final(out: Path, tmpdirs: set[str], statuses: tuple[str, ...]) -> dict:
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    record = json.loads((folder / "run.json").read_text())
    assert record["outcome"]["status"] in statuses, record["outcome"]
    assert not list(folder.glob("run.json.*")), "a stray temporary run.json"
    samples = folder / SAMPLES_DIR
    assert not list(samples.glob("*.csv")), sorted(p.name for p in samples.iterdir())
    written = {p.stem for p in samples.glob("*.parquet")}
    assert {PROCESS.name, THREADS_TABLE.name, STEPS.name} <= written, written
    assert tmpdirs and not [t for t in tmpdirs if Path(t).exists()], "the worker's temp folder is left"
    return record


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_50_ms_after_the_first_still_finalises(sig: signal.Signals, tmp_path: Path) -> None:
    require_framework("pytorch")
    out = tmp_path / "runs"
    tracer = _start(out, "--epochs", "30")
    try:
        _wait_for(lambda: '"epoch_start"' in _events(out), 300, tracer)
        tmpdirs = _worker_tmpdirs(tracer)
        tracer.send_signal(sig)
        time.sleep(0.05)
        tracer.send_signal(sig)
        code = tracer.wait(timeout=120)
    finally:
        if tracer.poll() is None:
            tracer.kill()
    assert code == 128 + sig, (tmp_path / "tracer.log").read_text()[-2000:]  # as a command run's (issue 56 item 18)
    _assert_final(out, tmpdirs, ("interrupted",))


def test_sigterms_while_the_run_is_being_finalised_do_not_cut_it_short(tmp_path: Path) -> None:
    """One SIGTERM right after the worker exits, then more every 20 ms until the tracer is done."""
    require_framework("pytorch")
    out = tmp_path / "runs"
    tracer = _start(out, "--epochs", "1")
    sent = 0
    try:
        _wait_for(lambda: '"epoch_start"' in _events(out), 300, tracer)
        tmpdirs = _worker_tmpdirs(tracer)
        _wait_for(lambda: '"end"' in _events(out), 300, tracer)  # the worker's last word
        worker = psutil.Process(int(next(out.glob("*/worker.pid")).read_text()))
        _wait_for(lambda: not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE, 120, tracer)
        while tracer.poll() is None:
            tracer.send_signal(signal.SIGTERM)
            sent += 1
            time.sleep(0.02)
    finally:
        if tracer.poll() is None:
            tracer.kill()
    assert sent >= 1
    # once the folder is final the handlers are gone: a SIGTERM then may end the tracer as it prints
    ended_by_sigterm = (0, 128 + signal.SIGTERM, -signal.SIGTERM)
    assert tracer.returncode in ended_by_sigterm, (tmp_path / "tracer.log").read_text()[-2000:]
    _assert_final(out, tmpdirs, ("ok",))


def test_a_run_that_stops_moving_ends_as_stalled_with_both_stacks(tmp_path: Path) -> None:
    """The injected stall is a hung loader's: the worker and a child of it both wait, idle."""
    require_framework("pytorch")
    out = tmp_path / "runs"
    tracer = _start(out, "--epochs", "1", "--inject-fault", "stall@1", "--stall-after", "3", "--timeout", "600")
    try:
        _wait_for(lambda: '"epoch_start"' in _events(out), 300, tracer)
        tmpdirs = _worker_tmpdirs(tracer)
        started = time.monotonic()
        code = tracer.wait(timeout=300)
    finally:
        if tracer.poll() is None:
            tracer.kill()
    assert code == 1 and time.monotonic() - started < 300
    record = _assert_final(out, tmpdirs, ("stalled",))
    assert "no progress for 3 s" in record["outcome"]["cause"]
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    stacks = (folder / STALL_STACKS).read_text()
    assert stacks.count("=== pid") == 2, stacks
    assert stacks.count("_inject_fault") == 2, stacks  # where each of the two processes waited
