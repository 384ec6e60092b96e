"""The lifeguard: when the tracer dies, the worker's group dies with it, and so does the nsys helper
agent that left the group (a left-over agent spins a core and hangs every later nsys session).

Real processes stand in for the tracer, the worker's group and the agent: the guard's rule matches an
agent by its command line (`--start-agent --session-name=profile-APP-NSYSPID`), which a plain Python
process can carry as arguments."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

SLEEPER = "import time; time.sleep(600)"
TRACER = """
import subprocess, sys, time
pid = str(__import__("os").getpid())
guard = subprocess.Popen([sys.executable, "-m", "tracer.measure.lifeguard", pid, sys.argv[1]])
print(guard.pid, flush=True)
time.sleep(600)
"""


def _agent(owner: int) -> subprocess.Popen[bytes]:
    """A process whose command line reads like nsys's agent for the nsys process `owner`, in its own session."""
    args = ["--start-agent", f"--session-name=profile-python-{owner}", "--shm-name=quadd-create-agent-x"]
    return subprocess.Popen([sys.executable, "-c", SLEEPER, *args], start_new_session=True)


def _gone(proc: subprocess.Popen[bytes], within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return True
        time.sleep(0.1)
    return False


def test_a_dead_tracer_takes_the_group_and_its_nsys_agent_but_no_other(tmp_path: Path) -> None:
    group = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)  # the worker's group
    ours, other = _agent(group.pid), _agent(group.pid + 1_000_000)  # another run's agent: left alone
    tracer = subprocess.Popen(
        [sys.executable, "-c", TRACER, str(group.pid)], stdout=subprocess.PIPE, cwd=Path(__file__).parents[3]
    )
    try:
        assert tracer.stdout is not None
        guard = psutil.Process(int(tracer.stdout.readline()))
        time.sleep(0.5)  # the guard is watching
        tracer.kill()
        tracer.wait()
        assert _gone(group, 20) and _gone(ours, 20), "the group and its nsys agent outlived the tracer"
        assert other.poll() is None
        guard.wait(20)
    finally:
        for proc in (group, ours, other):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
