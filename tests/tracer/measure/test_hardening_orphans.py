"""Issue 12, defects 2-3: every end of a run ends the worker's whole process tree (loader processes
included), the worker dies with its tracer, and interrupted PyTorch runs leave no /tmp/pymp-*.

Real `tracer profile` processes with `--workers 2` (PyTorch DataLoader processes); the tree's pids are
collected with psutil while it trains, then checked by pid (and creation time) after the fault."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import ctrl_c_reaches_python, require_framework

LONG = ["--epochs", "30", "--limit", "16", "--image-size", "64", "--dataset", "small", "--model", "alexnet"]
SETTLE_S = 8.0  # worker grace on SIGTERM is 5 s (process.TERMINATE_GRACE_S)


def _start(out: Path, *extra: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "tracer", "profile", "--framework", "pytorch", *LONG, "--workers", "2"]
    cmd += [*extra, "--out", str(out)]
    env = dict(os.environ)
    with (out.parent / "tracer.log").open("wb") as log:  # a pipe nobody reads would fill and block it
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=ctrl_c_reaches_python)


def _worker_pid(out: Path) -> int | None:
    for pid_file in out.glob("*/worker.pid"):
        try:
            return int(pid_file.read_text())
        except ValueError:
            return None
    return None


def _collect_tree(tracer: subprocess.Popen[bytes], out: Path, until: float, tmpdirs: set[str]) -> dict[int, float]:
    """pid -> create_time of the tracer, the worker and its loader processes, seen while it trains;
    the worker's $TMPDIR (where PyTorch's pymp-* go) into `tmpdirs`."""
    seen: dict[int, float] = {}
    deadline = time.monotonic() + until
    loaders_seen = False
    while time.monotonic() < deadline and tracer.poll() is None:
        try:
            root = psutil.Process(tracer.pid)
            procs = [root, *root.children(recursive=True)]
            wpid = _worker_pid(out)
            if wpid is not None:
                w = psutil.Process(wpid)
                tmpdirs.add(w.environ().get("TMPDIR", ""))
                procs += [w, *w.children(recursive=True)]
                loaders_seen = loaders_seen or len(w.children()) >= 2
            for p in procs:
                seen.setdefault(p.pid, p.create_time())
        except psutil.Error:
            pass
        if loaders_seen and len(seen) >= 4:
            break
        time.sleep(0.1)
    assert loaders_seen, f"no loader processes seen under the worker: {seen}"
    return seen


def _alive(seen: dict[int, float]) -> list[str]:
    out = []
    for pid, created in seen.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{pid} {p.name()} {p.cmdline()[:4]}")
        except psutil.Error:
            continue
    return out


def _assert_tree_ends(seen: dict[int, float], within: float) -> None:
    deadline = time.monotonic() + within
    while _alive(seen) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(seen), f"still alive {within:.0f} s after the end: {_alive(seen)}"


@pytest.mark.parametrize(
    "fault", ["worker-sigkill", "worker-crash", "tracer-sigkill", "timeout", "ctrl-c", "worker-stopped-tracer-sigkill"]
)
def test_no_process_of_the_run_outlives_it(fault: str, tmp_path: Path) -> None:
    require_framework("pytorch")
    out = tmp_path / "runs"
    extra = {"worker-crash": ["--inject-fault", "segv@2"], "timeout": ["--timeout", "25"]}.get(fault, [])
    tracer = _start(out, *extra)
    tmpdirs: set[str] = set()
    try:
        seen = _collect_tree(tracer, out, until=240, tmpdirs=tmpdirs)
        wpid = _worker_pid(out)
        assert wpid is not None
        if fault == "worker-sigkill":
            os.kill(wpid, signal.SIGKILL)
        elif fault == "tracer-sigkill":
            tracer.kill()
        elif fault == "worker-stopped-tracer-sigkill":  # issue 27, item 10: the worker's own lifeline cannot run
            for pid in [wpid, *(c.pid for c in psutil.Process(wpid).children(recursive=True))]:
                os.kill(pid, signal.SIGSTOP)
            time.sleep(0.5)
            tracer.kill()
        elif fault == "ctrl-c":
            tracer.send_signal(signal.SIGINT)
        code = tracer.wait(timeout=300)
        if "tracer-sigkill" not in fault:  # interrupted: 128 + SIGINT, as a shell reports it; else a failed run
            assert code == (128 + signal.SIGINT if fault == "ctrl-c" else 1), (tmp_path / "tracer.log").read_text()[
                -2000:
            ]
        _assert_tree_ends(seen, within=5.0)
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
    assert tmpdirs and all("dl-tracer-worker-" in t for t in tmpdirs), tmpdirs
    if "tracer-sigkill" not in fault:  # a SIGKILLed tracer cannot clean up after itself
        assert not [t for t in tmpdirs if Path(t).exists()], "the worker's temp folder (pymp-*) is left"
