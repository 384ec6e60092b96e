"""`--pyspy`: py-spy records the worker's Python stacks (all threads, idle ones too) from outside.

Started once the worker has written its pid (under nsys that is the grandchild, the real worker),
stopped at the end: py-spy ends by itself when the worker exits; one still running then gets
SIGINT, which makes it write its file. Output: `raw/pyspy.speedscope.json` (speedscope format),
its own log `raw/pyspy.log`, and `raw/pyspy.start_ns` (Unix ns when it attached, to place
the samples, whose times in the file are relative). It needs ptrace rights over the worker (root, or
`kernel.yama.ptrace_scope=0`, or CAP_SYS_PTRACE).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from tracer.core import trace_formats as tf
from tracer.core.errors import UserError
from tracer.core.paths import cache_root
from tracer.core.runfolder import RunFolder
from tracer.core.schema import KIND, WINDOW_CLOSE, WINDOW_EDGE, WINDOW_OPEN, Event

OUTPUT = f"raw/{tf.PYSPY_OUTPUT}"
LOG = "raw/pyspy.log"
#: When py-spy was started (Unix ns, one integer): its speedscope file has only relative times.
START = f"raw/{tf.PYSPY_START}"
RATE_HZ = 50
STOP_WAIT_S = 30.0


def find_pyspy() -> Path:
    """py-spy beside the tracer's interpreter (its venv), on PATH, or in the tool venv of the cache."""
    candidates = [Path(sys.executable).parent / "py-spy"]
    on_path = shutil.which("py-spy")
    if on_path:
        candidates.append(Path(on_path))
    candidates.append(cache_root() / "venv" / "bin" / "py-spy")
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise UserError("--pyspy needs py-spy: `pip install py-spy` into the tracer's environment")


class PySpyRecorder:
    def __init__(self, folder: RunFolder, pyspy: Path | None = None, windowed: bool = False) -> None:
        """`windowed`: the run has a trace window; py-spy attaches when the worker's `trace_window`
        event says it opened and is stopped (SIGINT: it writes its file) when it closes."""
        self.folder = folder
        self.pyspy = pyspy or find_pyspy()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.error: str | None = None
        self._window = WindowEdges(folder.events_path) if windowed else None

    def command(self, pid: int) -> list[str]:
        return [
            str(self.pyspy),
            "record",
            "--pid",
            str(pid),
            "--threads",
            "--idle",
            "--format",
            "speedscope",
            "-o",
            str(self.folder.path / OUTPUT),
            "--rate",
            str(RATE_HZ),
        ]

    def poll(self, worker_pid: int | None) -> None:
        """Called from the runner's loop: attaches once the worker's pid is known (and its window opened)."""
        if self._window is not None:
            edges = self._window.poll()
            if self.proc is not None and WINDOW_CLOSE in edges and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
            if WINDOW_OPEN not in edges or self.proc is not None:
                return
        if self.proc is not None or worker_pid is None:
            return
        self._log = (self.folder.path / LOG).open("wb")
        (self.folder.path / START).write_text(f"{time.time_ns()}\n")
        self.proc = subprocess.Popen(
            self.command(worker_pid), stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def stop(self) -> list[str]:
        """Waits for py-spy to write its output; returns the files kept (relative to the run folder)."""
        if self.proc is None:
            never = "the trace window never opened" if self._window is not None else "the worker wrote no pid file"
            self.error = f"py-spy never started: {never}"
            return []
        try:
            self.proc.wait(timeout=STOP_WAIT_S / 3)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
        kept = [p for p in (OUTPUT, START, LOG) if (self.folder.path / p).exists()]
        if OUTPUT not in kept:
            self.error = f"py-spy wrote no {OUTPUT} (exit code {self.proc.returncode}; see {LOG})"
        return kept


class WindowEdges:
    """The `trace_window` edges the worker has written since the last poll, read incrementally (the
    events file grows all run long; it is never read again from the start)."""

    def __init__(self, events_path: Path) -> None:
        self.path = events_path
        self._offset = 0
        self._partial = b""

    def poll(self) -> set[str]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
                self._offset = f.tell()
        except OSError:
            return set()
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        edges = set()
        for line in lines:
            if Event.TRACE_WINDOW.encode() not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get(KIND) == Event.TRACE_WINDOW:
                edges.add(str(event.get(WINDOW_EDGE)))
        return edges
