"""The worker dies with its tracer: no training goes on unwatched after the tracer is gone.

Two guards, both Linux-first and standard-library only (this runs under Python 3.6 too):
the kernel's parent-death signal (prctl PR_SET_PDEATHSIG, through ctypes) and a daemon thread that
checks every half second that the tracer's pid is still alive (the only guard under `--trace nsys`,
where the worker's parent is nsys's launcher, and where prctl is not available).
Either one ends the worker's whole process group (its data-loader processes included) with SIGKILL,
when the worker leads that group (the runner starts it in a new session).
"""

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

from tracer.worker.schema import LIFELINE_THREAD, TRACER_PID_ENV

PR_SET_PDEATHSIG = 1
CHECK_EVERY_S = 0.5


def _end_group() -> None:
    """SIGKILL to the worker's process group if it is the worker's own, else to the worker alone."""
    try:
        group = os.getpgrp()
        tracer = int(os.environ.get(TRACER_PID_ENV, "0") or 0)
        if group != _pgid(tracer):  # the runner's new session: the worker's (or nsys's) group alone
            os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGKILL)


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid) if pid > 0 else -1
    except OSError:
        return -1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists but is not ours to signal
    return True


def _on_parent_death(signum: int, frame: object) -> None:
    _end_group()


def _watch(tracer: int, parent: int) -> None:
    while True:
        time.sleep(CHECK_EVERY_S)
        if not _alive(tracer) or (parent > 1 and os.getppid() != parent and not _alive(parent)):
            sys.stderr.write("tracer (pid %d) is gone: the worker ends its process group\n" % tracer)
            sys.stderr.flush()
            _end_group()


def install() -> None:
    """Call first thing in the worker. Does nothing when no tracer pid was given (a worker run by hand)."""
    tracer = int(os.environ.get(TRACER_PID_ENV, "0") or 0)
    if tracer <= 0:
        return
    parent = os.getppid()
    if sys.platform.startswith("linux") and parent == tracer:
        try:
            # SIGUSR2 rather than SIGKILL: its handler ends the loader processes as well as the worker
            signal.signal(signal.SIGUSR2, _on_parent_death)
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGUSR2, 0, 0, 0)
        except (OSError, AttributeError, ValueError):
            pass
    if not _alive(tracer):  # the tracer died before prctl took effect
        _end_group()
    thread = threading.Thread(target=_watch, args=(tracer, parent), name=LIFELINE_THREAD)
    thread.daemon = True
    thread.start()
