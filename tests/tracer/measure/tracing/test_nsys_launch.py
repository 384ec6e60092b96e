"""The nsys launcher: nsys sessions on one machine take turns (two at once hang or die with Debian's
nsys 2022.4), and a run that waits says so. The launcher runs any command, so the lock is tested with
a plain Python child instead of nsys."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tracer.measure.tracing.nsys import LAUNCHER
from tracer.measure.tracing.nsys_launch import take_session_lock


def _launch(run_dir: Path, marker: Path) -> subprocess.Popen[str]:
    (run_dir / "raw").mkdir(parents=True, exist_ok=True)
    # like the worker, the child writes worker.pid first (a launch without it counts as failed)
    pid_file = run_dir / "worker.pid"
    child = [sys.executable, "-c", f"open({str(pid_file)!r}, 'w').write('1'); open({str(marker)!r}, 'w').write('ran')"]
    launch = [sys.executable, str(LAUNCHER), str(run_dir), *child]
    return subprocess.Popen(launch, stderr=subprocess.PIPE, text=True)


def test_a_second_session_waits_for_the_first_and_says_so(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with take_session_lock():
        proc = _launch(tmp_path / "run", marker)
        time.sleep(5)  # an unblocked launch of this child ends well within it, even on a busy machine
        assert not marker.exists() and proc.poll() is None  # held back while the lock is taken
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and marker.read_text() == "ran"
    assert "waiting for the nsys session of pid" in err and "one session at a time" in err
    assert len(err.strip().splitlines()) == 1


def test_a_free_lock_is_taken_without_a_word(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    proc = _launch(tmp_path / "run", marker)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and marker.exists() and err == ""
