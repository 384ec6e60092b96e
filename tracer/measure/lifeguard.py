"""The worker's process group dies with its tracer even when the worker is stopped (SIGSTOP).

The worker's own lifeline (tracer/worker/lifeline.py) is code in the worker: a stopped worker runs none
of it, so a tracer SIGKILLed after a SIGSTOP of the worker left it and its loaders stopped for ever.
This guard is a separate small process, started by the runner beside the worker in a session of its own
(a stop or a Ctrl-C aimed at the worker's group does not reach it): when the tracer is gone it sends
SIGKILL to the worker's whole group, which the kernel delivers to stopped processes too, no SIGCONT
needed. It ends by itself once the group is empty. Standard library only: it starts in a few ms.

Under `--trace nsys`, nsys starts a helper agent (`nsys --start-agent --session-name=profile-APP-NSYSPID`)
that leaves the group: a group kill misses it, and a left-over agent spins a core and makes every later
nsys session on the machine hang. The guard ends the agents of the group's processes with it
(`end_nsys_agents`, which the nsys backend also uses after a run that ended by itself).

A user's command may start processes in sessions of their own (torchrun's ranks): given a MARK, an
environment entry only the run's processes hold (the probe's run folder), the guard ends those too.

    python -m tracer.measure.lifeguard TRACER_PID WORKER_PGID [MARK]
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Iterable

CHECK_EVERY_S = 0.2


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _processes() -> Iterable[tuple[int, list[bytes], int]]:
    """(pid, argv, pgid) of every process we can read."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as f:
                pgid = int(f.read().rsplit(b")", 1)[1].split()[2])
        except (OSError, IndexError, ValueError):
            continue
        yield int(name), argv, pgid


def group_members(pgid: int) -> list[int]:
    return [pid for pid, _argv, group in _processes() if group == pgid]


def end_nsys_agents(owners: Iterable[int]) -> list[int]:
    """SIGKILLs the nsys helper agents whose session is named after one of `owners` (nsys pids); their pids.
    Not SIGTERM: an agent spinning after its session hung was seen to outlive it."""
    suffixes = tuple(f"-{pid}".encode() for pid in owners)
    ended = []
    for pid, argv, _pgid in _processes():
        if b"--start-agent" not in argv or not suffixes:
            continue
        if any(a.startswith(b"--session-name=") and a.endswith(suffixes) for a in argv):
            try:
                os.kill(pid, signal.SIGKILL)
                ended.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
    return ended


def marked(mark: str) -> list[int]:
    """Pids of the processes whose environment holds `mark` (NAME=value) exactly."""
    entry = mark.encode() + b"\0"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if env.startswith(entry) or b"\0" + entry in env:
            found.append(int(name))
    return found


def guard(tracer: int, pgid: int, mark: str = "") -> int:
    """Returns when the group is empty; SIGKILLs the group (and its nsys agents, and the processes
    holding `mark`) first if the tracer went before it."""
    while _group_alive(pgid):
        if os.getppid() != tracer:  # reparented: the tracer is gone
            members = group_members(pgid)
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            end_nsys_agents(members)
            for pid in marked(mark) if mark else ():
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            return 0
        time.sleep(CHECK_EVERY_S)
    return 0


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the tracer's Ctrl-C is the tracer's to handle
    tracer, pgid = int(argv[0]), int(argv[1])
    return guard(tracer, pgid, argv[2] if len(argv) > 2 else "")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
