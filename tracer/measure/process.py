"""Process control of a measured run: the child started in a group of its own, its output teed, the
tracer's signals counted (never raised), the lifeguard beside it, and every process of it ended and
reaped however the run ends; no process outlives a run."""

from __future__ import annotations

import ctypes
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa

import tracer
from tracer.core.errors import UserError
from tracer.core.paths import cache_root
from tracer.core.runfolder import RunFolder
from tracer.core.signals import TERMINAL_SIGNALS
from tracer.measure.progress import ProgressView
from tracer.measure.stall import tree_pids
from tracer.measure.tracing.pyspy import find_pyspy

POLL_S = 0.2
PUMP_GRACE_S = 2.0  # how long the command's output may take to drain once it has ended
TERMINATE_GRACE_S = 5.0
WORKER_TMP_PREFIX = "dl-tracer-worker-"
TMPDIR_MAX_CHARS = 40
STALL_STACKS = "raw/stalled-stacks.txt"
STACKS_TIMEOUT_S = 30.0


def worker_pythonpath() -> Path:
    """A folder holding only `tracer/worker`, so the framework's interpreter sees none of the
    tracer's own packages (a NumPy from here would shadow MXNet's pinned one)."""
    source = Path(tracer.__file__).resolve().parent
    stage = cache_root() / "worker-path" / hashlib.sha256(str(source).encode()).hexdigest()[:16]
    pkg = stage / "tracer"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text('"""Worker-side stub of the tracer package."""\n')
    link = pkg / "worker"
    if not (link.is_symlink() and link.resolve() == source / "worker"):
        tmp = pkg / f"worker.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(source / "worker", target_is_directory=True)
        os.replace(tmp, link)
    return stage


@dataclass(frozen=True)
class Child:
    """The process a run measures, as `Runner.supervise` starts it."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    #: (stdout file, stderr file): the child's output reaches our stdout and stderr as it comes and is
    #: kept in these files; None: both go into raw/worker.log only (the built-in worker).
    tee: tuple[Path, Path] | None = None
    #: What an interrupted tracer sends first: the worker takes SIGTERM; None: the signal the tracer got, as
    #: itself (a user's script gets SIGTERM as SIGTERM, so its checkpoint-on-preemption handler runs).
    interrupt_signal: int | None = signal.SIGTERM
    #: Whether the measured process writes worker.pid itself; under a wrapping backend (nsys) one that does not
    #: is started through a shell that writes it (`nsys.ANNOUNCE_PID`): the sampler waits for it either way.
    pid_file: bool = True
    progress: Callable[[], ProgressView] | None = None
    progress_files: tuple[Path, ...] = ()  # more files whose growth is progress for the stall watch
    #: Whether processes that left the child's group (torchrun starts each rank in a session of its own)
    #: are ended too: this process becomes their subreaper, so they are found as its descendants.
    sweep: bool = False
    #: An environment entry (NAME=value) only the child's processes hold: the lifeguard ends those that
    #: left its group too, should this process die first.
    mark: str = ""
    #: `--nproc`: this many ranks of the built-in worker in one process group, rank r's folder replacing the
    #: last argument (tracer.measure.rank_launch); a rank that fails ends them all.
    ranks: int = 1


@dataclass(frozen=True)
class Ended:
    """How the supervised child ended: its exit status, what ended it (None: itself), what was sampled."""

    returncode: int
    ended_by: str | None
    sampling: Any
    sampler_error: str | None
    failed_rank: int | None = None  # the rank whose failure ended a run of several ranks
    rank_returncode: int | None = None


class Tee(threading.Thread):
    """Copies a child's pipe to one of our file descriptors and to a file, chunk by chunk, unchanged."""

    CHUNK = 65536

    def __init__(self, pipe: Any, fd: int, path: Path) -> None:
        super().__init__(daemon=True)
        self.pipe, self.fd, self.path = pipe, fd, path
        self.error = ""  # why the file stopped getting the output (a full disk): the terminal still gets it all
        self.start()

    def run(self) -> None:
        to_terminal = True
        try:
            kept: Any = self.path.open("wb")
        except OSError as e:
            kept, self.error = None, f"{self.path.name} not kept: {e.strerror or e}"
        while True:  # the pipe is read to its end whatever fails: a command never blocks on its output
            try:
                chunk = os.read(self.pipe.fileno(), self.CHUNK)
            except OSError:  # EIO: a pseudo-terminal whose every writer has closed it (its end of file)
                break
            if not chunk:
                break
            if kept is not None:
                try:
                    kept.write(chunk)
                    kept.flush()
                except OSError as e:
                    _closed(kept)
                    kept, self.error = None, f"{self.path.name} cut short: {e.strerror or e}"
            while to_terminal and chunk:
                try:
                    written = os.write(self.fd, chunk)
                except BlockingIOError:
                    time.sleep(0.01)
                    continue
                except OSError:  # our terminal went away: the file still gets everything
                    to_terminal = False
                    break
                chunk = chunk[written:]
        _closed(kept)
        self.pipe.close()


def terminal_like(fd: int) -> tuple[Any, int] | None:
    """Where our `fd` is a terminal, a pseudo-terminal for the child's stream in its place: (our end, as
    a file to read, and the child's end). Its output is left as written (no newline turned into CR LF, so
    raw/ keeps the command's bytes) and its window is our terminal's size. Under a pipe a command's
    tqdm, rich and colours change mode; on a terminal they stay as they are without the tracer. None
    where `fd` is not a terminal, or no pseudo-terminal can be opened."""
    import fcntl
    import termios

    try:
        if not os.isatty(fd):
            return None
        ours, theirs = os.openpty()
    except OSError:
        return None
    try:
        attrs = termios.tcgetattr(theirs)
        attrs[1] &= ~termios.OPOST  # output processing off: bytes as the command wrote them
        termios.tcsetattr(theirs, termios.TCSANOW, attrs)
        fcntl.ioctl(theirs, termios.TIOCSWINSZ, fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    except OSError:
        pass  # a size or mode that cannot be set: still a terminal
    return os.fdopen(ours, "rb", buffering=0), theirs


def _closed(file: Any) -> None:
    """Closes `file` (None: nothing), losing what it could not write: its disk is full."""
    if file is not None:
        try:
            file.close()
        except OSError:
            pass


class Signals:
    """Ctrl-C (SIGINT) and `kill <tracer>` (SIGTERM), from before the run folder exists until it is
    final: the first asks the training to end (the run is `interrupted`, recorded like any other end),
    a second hurries the ending (the worker gets no grace), and none abandons it: no handler raises,
    so no signal can cut the finalising (run.json, samples to Parquet, the worker's temp folder) short.
    Twice 50 ms apart used to leave the run `running`, its samples CSV and its temp folder behind."""

    HANDLED = TERMINAL_SIGNALS

    def __init__(self) -> None:
        self.count = 0
        self.last: int = signal.SIGINT
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        self.count += 1
        self.last = signum

    @property
    def hurry(self) -> bool:
        return self.count > 1

    def __enter__(self) -> Signals:
        # Arrow's own handlers would cancel a CSV read on SIGTERM and then let the signal kill us
        # (samples left CSV, "ArrowCancelled: received signal 15"): ours count, Arrow's stand aside.
        pa.enable_signal_handlers(False)
        for sig in self.HANDLED:
            if signal.getsignal(sig) == signal.SIG_IGN:  # ignored at start (a background job): stays so
                continue
            try:
                self._previous[sig] = signal.signal(sig, self._handler)
            except ValueError:  # not the main thread: whoever runs us there handles signals
                break
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        pa.enable_signal_handlers(True)


def read_pid(folder: RunFolder) -> int | None:
    try:
        return int(folder.worker_pid_path.read_text().strip())
    except (OSError, ValueError):
        return None


def terminate(
    proc: subprocess.Popen[bytes], hurry: Callable[[], bool] = lambda: False, first: int = signal.SIGTERM
) -> None:
    """`first` (SIGTERM) to the worker's whole process group (DataLoader workers too), SIGKILL if it
    lingers past the grace, or at once when `hurry()` turns true (a second Ctrl-C)."""
    for sig in (first, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + TERMINATE_GRACE_S
        while time.monotonic() < deadline and not (sig != signal.SIGKILL and hurry()):
            try:
                proc.wait(timeout=POLL_S / 2)
                return
            except subprocess.TimeoutExpired:
                continue


def start_lifeguard(pgid: int, mark: str = "") -> subprocess.Popen[bytes] | None:
    """tracer/measure/lifeguard.py beside the worker: it SIGKILLs the worker's group if this process dies,
    even while the worker is stopped."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "tracer.measure.lifeguard", str(os.getpid()), str(pgid), *([mark] if mark else [])],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(Path(tracer.__file__).resolve().parents[1])},
        )
    except OSError:
        return None  # the worker's own lifeline still ends it unless it is stopped


def stop_lifeguard(guard: subprocess.Popen[bytes] | None) -> None:
    """It ends by itself once the worker's group is empty; reaped here, killed if it lingers."""
    if guard is None:
        return
    try:
        guard.wait(timeout=2 * POLL_S + 1)
    except subprocess.TimeoutExpired:
        guard.kill()
        guard.wait()


def dump_stacks(folder: RunFolder, pid: int) -> None:
    """py-spy dumps of the worker and every process under it into raw/ (STALL_STACKS), before they
    are ended: where each one waits is the finding of a stalled run."""
    try:
        _dump_stacks(folder.path / STALL_STACKS, pid)
    except OSError:  # a full disk: the stall is recorded all the same, and the run is ended
        pass


def _dump_stacks(out: Path, pid: int) -> None:
    try:
        pyspy: Path | None = find_pyspy()
    except UserError:
        pyspy = None
    with out.open("w") as f:
        for p in tree_pids(pid):
            f.write(f"=== pid {p}\n")
            f.flush()
            if pyspy is None:
                f.write("py-spy is not installed: `pip install py-spy` into the tracer's environment\n")
                continue
            try:
                done = subprocess.run(
                    [str(pyspy), "dump", "--pid", str(p)], capture_output=True, text=True, timeout=STACKS_TIMEOUT_S
                )
                f.write(done.stdout + done.stderr + "\n")
            except (OSError, subprocess.TimeoutExpired) as e:
                f.write(f"py-spy dump failed: {e}\n")


def worker_tmp() -> Path:
    """A temp folder of the worker's own, removed when it ends. Short: multiprocessing puts Unix
    sockets in it, whose paths may not pass 107 bytes, so a long $TMPDIR gives way to /tmp."""
    base = tempfile.gettempdir()
    if len(base) > TMPDIR_MAX_CHARS or not os.access(base, os.W_OK):
        base = "/tmp"
    return Path(tempfile.mkdtemp(prefix=WORKER_TMP_PREFIX, dir=base))


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def become_subreaper() -> bool:
    """Makes this process the reaper of its orphaned descendants (Linux): a process of the command that
    left its group and outlived its parent is then still found under us, and ended. False elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def sweep_descendants(known: set[int]) -> list[int]:
    """SIGKILLs and reaps every descendant of this process not in `known` (those that were there before
    the child started, and the helpers still ending); returns their pids."""
    try:
        left = [p for p in psutil.Process().children(recursive=True) if p.pid not in known]
    except psutil.Error:
        return []
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            continue
    for p in left:
        try:
            os.waitpid(p.pid, 0)  # ours to reap once they were reparented to us
        except (ChildProcessError, OSError):
            pass
    return [p.pid for p in left]


def end_group(pgid: int) -> None:
    """SIGKILL to whatever is left of the worker's process group once the worker itself has ended."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
