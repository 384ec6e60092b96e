"""Runs `nsys profile ...` for the nsys backend, retrying when nsys fails before the worker started.

Run as a script by path (`python nsys_launch.py RUN_DIR NSYS_ARGS...`), so it imports only the
standard library. Why: under heavy CPU load nsys sometimes dies at launch (`sem_open ... No such
file or directory` from its ProcessWaiter, seen with Debian's 2022.4 on a loaded 2-core machine),
before the worker wrote `worker.pid`; training never began, so running nsys again is safe.

Exit status: nsys's own (the app's code, or 128+N for a signal N), and 128+N when nsys itself dies
of signal N. SIGTERM/SIGINT (the runner ending the run) reach nsys through the process group; this
wrapper outlives them so that the runner waits until nsys has written its report.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

ATTEMPTS = 3
LAUNCH_FAILURE_WITHIN_S = 120.0
RETRY_PAUSE_S = 2.0


def main(argv: list[str]) -> int:
    run_dir, cmd = argv[0], argv[1:]
    stopping: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    pid_file = os.path.join(run_dir, "worker.pid")
    rc = 1
    for attempt in range(1, ATTEMPTS + 1):
        started = time.monotonic()
        proc = subprocess.Popen(cmd, restore_signals=True)
        while True:
            try:
                rc = proc.wait()
                break
            except InterruptedError:
                continue
        if rc < 0:
            rc = 128 - rc
        launch_failed = (
            rc != 0
            and not stopping
            and not os.path.exists(pid_file)
            and time.monotonic() - started < LAUNCH_FAILURE_WITHIN_S
        )
        if not launch_failed or attempt == ATTEMPTS:
            return rc
        sys.stderr.write(
            f"dl-tracer: nsys exited with code {rc} before the worker started; retrying ({attempt + 1}/{ATTEMPTS})\n"
        )
        sys.stderr.flush()
        time.sleep(RETRY_PAUSE_S)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
