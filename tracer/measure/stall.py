"""Whether a training has stopped moving: no new event, no new step, and (almost) no CPU in its whole
process tree for `--stall-after` seconds.

A hung input pipeline (Paddle's loader waiting for a batch that was lost) sits idle: every process
blocks on a queue. Such a run is ended as `stalled` with the stacks of its processes, rather than
left to `--timeout` or for ever. A slow step is not a stall: it burns CPU (or, on a GPU, the host
spins in the synchronisation), and any event or step row resets the clock. The tree is the one the
runner launched: under `--trace nsys`, nsys writing its report after the worker has gone is progress.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import psutil

CHECK_EVERY_S = 2.0
# Below this share of one core over the window the tree counts as idle (the lifeline, Paddle's 5 s
# queue polls and the like take a fraction of a percent).
IDLE_CORE_SHARE = 0.05


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` and its descendants now alive (0.0 if it is gone)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            continue
    return total


def tree_pids(pid: int) -> list[int]:
    try:
        root = psutil.Process(pid)
        return [root.pid, *(p.pid for p in root.children(recursive=True))]
    except psutil.Error:
        return []


class StallWatch:
    """`check(pid)` in the runner's loop; True once the run has made no progress for `limit_s`."""

    def __init__(self, progress_files: list[Path], limit_s: float, clock: Callable[[], float] = time.monotonic):
        self.files = progress_files
        self.limit_s = limit_s
        self.clock = clock
        self._mark = clock()
        self._checked = 0.0
        self._sizes: tuple[int, ...] = ()
        self._cpu_s: float | None = None
        self._pid: int | None = None

    def _sizes_now(self) -> tuple[int, ...]:
        sizes = []
        for path in self.files:
            try:
                sizes.append(path.stat().st_size)
            except OSError:
                sizes.append(-1)
        return tuple(sizes)

    def check(self, pid: int | None) -> bool:
        if self.limit_s <= 0 or pid is None:
            return False
        now = self.clock()
        if now - self._checked < CHECK_EVERY_S:
            return False
        elapsed, self._checked = now - self._checked, now
        sizes, cpu = self._sizes_now(), tree_cpu_s(pid)
        busy = self._cpu_s is None or pid != self._pid or cpu - self._cpu_s > IDLE_CORE_SHARE * elapsed
        if sizes != self._sizes or busy:
            self._mark = now
        self._sizes, self._cpu_s, self._pid = sizes, cpu, pid
        return now - self._mark >= self.limit_s
