"""Runs `nsys profile ...` for the nsys backend: retries a launch that failed, and stops an nsys
that hangs after the worker has exited.

Run as a script by path (`python nsys_launch.py RUN_DIR NSYS_ARGS...`), so it imports only the standard
library. The app announces its start by writing RUN_DIR/worker.pid: the built-in worker does so first, and
a user's command is started through a shell that does (`nsys.ANNOUNCE_PID`). Why:
- under heavy CPU load nsys sometimes dies at launch (`sem_open ... No such file or directory` from
  its ProcessWaiter, seen with Debian's 2022.4 on a loaded 2-core machine), before the worker wrote
  `worker.pid`; training never began, so running nsys again is safe (3 tries). The same holds for an
  nsys that exits 0 without having started the worker (CI of 28 Nov: a TensorFlow run under a capture
  range, nsys 2022.4 on a loaded 2-core machine; not reproduced in 40 tries with two CPU hogs).
  A user's command announces itself the same way, so its own quick failure is never taken for nsys's
  and it runs once;
- with CPU sampling on (`--nsys-sampling`) Debian's nsys 2022.4 was seen to hang for good in
  "Generating ...qdstrm" after the worker had finished. Once the worker has exited, nsys gets
  $TRACER_NSYS_REPORT_TIMEOUT_S (default 600) to write its report; then it is stopped and this
  exits with code 1 (the run is still judged by the worker's own events).

- two `nsys profile` sessions at once on one machine hang or die (Debian's 2022.4, measured: of three
  started together on an idle 2-core machine, two hung in "Generating ...qdstrm" past 120 s and one
  died in `sem_open`; each alone took 3 s). Sessions (and `nsys export`s) therefore take turns on `SESSION_LOCK`, a
  machine-wide lock file held for the whole `nsys profile`; a run that waits says so once. Two traced
  runs at once would also disturb each other's measurements.

The nsys pid goes to `raw/nsys.pid`: its helper agent (`nsys --start-agent --session-name=...-PID`)
leaves the process group, and the backend ends it after the run.

Exit status: nsys's own (the app's code, or 128+N for a signal N), and 128+N when nsys itself dies
of signal N; 1 when nsys exited 0 in every try without starting the worker. SIGTERM/SIGINT (the
runner ending the run) reach nsys through the process group; this wrapper outlives them so that the
runner waits until nsys has written its report.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import IO

ATTEMPTS = 3
LAUNCH_FAILURE_WITHIN_S = 120.0
RETRY_PAUSE_S = 2.0
STOP_GRACE_S = 15.0
#: Held by every `nsys profile` this tool starts (and by tests that run nsys directly), machine-wide.
SESSION_LOCK = os.path.join(tempfile.gettempdir(), "dl-tracer-nsys-session.lock")
#: How this launcher's lines on stderr begin: a NOTE (waiting, retrying) is no reason a run failed, and the
#: failure reason taken from stderr's last line passes over it; a line that says why nsys failed is SAYS alone.
SAYS = "dl-tracer: "
NOTE = SAYS + "note: "


def take_session_lock(say: IO[str] | None = None) -> IO[str]:
    """Blocks until no other nsys session of this tool runs on the machine; the lock lasts as long as
    the returned file stays open (the process's exit releases it, whatever ends it)."""
    fd = os.open(SESSION_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    lock = os.fdopen(fd, "r+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = lock.read().strip() or "another process"
        if say is not None:
            say.write(f"{NOTE}waiting for the nsys session of {holder} to end (nsys runs one session at a time)\n")
            say.flush()
        fcntl.flock(lock, fcntl.LOCK_EX)
    lock.seek(0)
    lock.truncate()
    lock.write(f"pid {os.getpid()}\n")
    lock.flush()
    return lock


def _alive(pid: int) -> bool:
    """A zombie (exited, not yet reaped by nsys) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _worker_pid(run_dir: str) -> int | None:
    try:
        with open(os.path.join(run_dir, "worker.pid")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _wait(proc: subprocess.Popen[bytes], run_dir: str, report_timeout_s: float) -> int:
    worker_gone_at: float | None = None
    while True:
        try:
            return proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        pid = _worker_pid(run_dir)
        if pid is None or _alive(pid):
            continue
        worker_gone_at = worker_gone_at or time.monotonic()
        if time.monotonic() - worker_gone_at < report_timeout_s:
            continue
        sys.stderr.write(
            f"{SAYS}nsys did not finish its report within {report_timeout_s:g} s after the worker exited; stopping it\n"
        )
        sys.stderr.flush()
        proc.terminate()
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return 1


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: nsys_launch.py RUN_DIR NSYS_ARGS...\n")
        return 2
    run_dir, cmd = argv[0], argv[1:]
    report_timeout_s = float(os.environ.get("TRACER_NSYS_REPORT_TIMEOUT_S", "600"))
    stopping: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    pid_file = os.path.join(run_dir, "worker.pid")
    _session = take_session_lock(sys.stderr)  # held until this process exits
    rc = 1
    for attempt in range(1, ATTEMPTS + 1):
        started = time.monotonic()
        proc = subprocess.Popen(cmd)
        with open(os.path.join(run_dir, "raw", "nsys.pid"), "w") as f:
            f.write(f"{proc.pid}\n")
        rc = _wait(proc, run_dir, report_timeout_s)
        if rc < 0:
            rc = 128 - rc
        launch_failed = (
            not stopping and not os.path.exists(pid_file) and time.monotonic() - started < LAUNCH_FAILURE_WITHIN_S
        )
        if not launch_failed:
            return rc
        if attempt < ATTEMPTS:
            say = f"nsys exited with code {rc} before the worker started; retrying ({attempt + 1}/{ATTEMPTS})"
        else:
            say = f"nsys never started the worker in {ATTEMPTS} tries (its last exit code: {rc})"
        sys.stderr.write(f"{NOTE if attempt < ATTEMPTS else SAYS}{say}\n")
        sys.stderr.flush()
        if attempt < ATTEMPTS:
            time.sleep(RETRY_PAUSE_S)
    return rc or 1  # an nsys that ran nothing has not succeeded, whatever it says


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
