"""The suite's guard (tests/conftest.py `no_child_left_behind`) fails a test that leaves a process behind,
and kills that process; a test whose children all exit passes. Run as a user runs pytest, in a child."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
TESTS = """
import subprocess, sys

def test_leaves_a_sleeper(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    (tmp_path.parent.parent / "pid").write_text(str(proc.pid))

def test_waits_for_its_child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


def test_a_test_leaving_a_child_fails_and_the_child_is_killed(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("from tests.conftest import no_child_left_behind  # noqa: F401\n")
    (tmp_path / "test_leaky.py").write_text(TESTS)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "base"),
         str(tmp_path)],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out  # the leaky test errors at teardown; both bodies passed
    assert "2 passed, 1 error" in out and "test_leaves_a_sleeper left 1 process(es) behind" in out, out
    pid = int((tmp_path / "pid").read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
