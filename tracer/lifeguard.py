"""The worker's process group dies with its tracer even when the worker is stopped (SIGSTOP).

The worker's own lifeline (tracer/worker/lifeline.py) is code in the worker: a stopped worker runs none
of it, so a tracer SIGKILLed after a SIGSTOP of the worker left it and its loaders stopped for ever.
This guard is a separate small process, started by the runner beside the worker in a session of its own
(a stop or a Ctrl-C aimed at the worker's group does not reach it): when the tracer is gone it sends
SIGKILL to the worker's whole group, which the kernel delivers to stopped processes too, no SIGCONT
needed. It ends by itself once the group is empty. Standard library only: it starts in a few ms.

    python -m tracer.lifeguard TRACER_PID WORKER_PGID
"""

from __future__ import annotations

import os
import signal
import sys
import time

CHECK_EVERY_S = 0.2


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def guard(tracer: int, pgid: int) -> int:
    """Returns when the group is empty; SIGKILLs the group first if the tracer went before it."""
    while _group_alive(pgid):
        if os.getppid() != tracer:  # reparented: the tracer is gone
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            return 0
        time.sleep(CHECK_EVERY_S)
    return 0


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the tracer's Ctrl-C is the tracer's to handle
    tracer, pgid = (int(a) for a in argv)
    return guard(tracer, pgid)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
