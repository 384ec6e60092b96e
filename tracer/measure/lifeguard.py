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
environment entry only the run's processes hold (the probe's run folder), the guard ends those too, and
every descendant of the tracer it saw (the tracer is their subreaper): a daemon started with
`setsid env -i` holds no mark and no group of the run.

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


SCAN_EVERY_S = 1.0
"""How often a command run's guard notes the tracer's descendants (one pass over /proc)."""


def _started(pid: int) -> tuple[int, int, int] | None:
    """(parent pid, process group, start time in clock ticks) of `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), int(fields[2]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def descendants(root: int) -> dict[int, int]:
    """pid -> start time of every process under `root` outside `root`'s own process group (the tracer's
    helpers, py-spy among them, are in it) but this one. The tracer of a command is its subreaper: a
    daemon that left the group and cleared its environment (`setsid env -i ...`) is still found under
    it while it lives, and remembered here for when it does not."""
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[int, int, int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            seen = _started(int(name))
            if seen is not None:
                children.setdefault(seen[0], []).append(int(name))
                stats[int(name)] = seen
    own_group = stats.get(root, (0, -1, 0))[1]
    out: dict[int, int] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid != os.getpid() and pid not in out:
            if stats[pid][1] != own_group:
                out[pid] = stats[pid][2]
            todo += children.get(pid, [])
    return out


def _still(known: dict[int, int]) -> dict[int, int]:
    """Those of `known` alive as the same process (a reused pid has another start time)."""
    alive = {}
    for pid, start in known.items():
        seen = _started(pid)
        if seen is not None and seen[2] == start:
            alive[pid] = start
    return alive


def guard(tracer: int, pgid: int, mark: str = "") -> int:
    """Returns when the group is empty (and, for a command, every process it left behind is gone);
    SIGKILLs the group, its nsys agents, the processes holding `mark` and the tracer's descendants it
    saw first if the tracer went before it."""
    known: dict[int, int] = {}
    scanned = 0.0
    while _group_alive(pgid) or (mark and _still(known)):
        if os.getppid() != tracer:  # reparented: the tracer is gone
            members = group_members(pgid)
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            end_nsys_agents(members)
            for pid in {*(marked(mark) if mark else ()), *_still(known)}:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            return 0
        if mark and time.monotonic() - scanned >= SCAN_EVERY_S:
            known = {**_still(known), **descendants(tracer)}
            scanned = time.monotonic()
        time.sleep(CHECK_EVERY_S)
    return 0


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the tracer's Ctrl-C is the tracer's to handle
    tracer, pgid = int(argv[0]), int(argv[1])
    return guard(tracer, pgid, argv[2] if len(argv) > 2 else "")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
