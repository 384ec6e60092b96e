"""Samples the training process tree from the outside, as the study did, and streams it to disk.

CPU % is computed from per-process CPU-time deltas (so DataLoader workers that come and go are
counted), as `cpu_pct` (100 = every core busy, the study's scale) and `cpu_cores` (1.0 = one core).
RSS is the sum over the tree (a page forked loader workers share counts in each); PSS, beside it, counts
a shared page once (split among the processes mapping it), read at most every PSS_EVERY_S per process
(the kernel walks the process's page tables to say it). Per-thread CPU times feed the thread timelines.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tracer.core import schema
from tracer.core.records import SamplingInfo
from tracer.core.runfolder import CsvStream, RunFolder
from tracer.measure.nvml import Nvml
from tracer.measure.rapl import RaplReader

FLUSH_EVERY_S = 0.5
THREAD_NAME_REFRESH_S = 2.0
TREE_RESCAN_S = 1.0
# CPU % is taken over at least this long: CPU times move in clock ticks (10 ms on Linux), so a reading
# over one tick or less snapped to 0 % or to 100 % of a core per process (1016 % of all cores at
# --sample-hz 1000). Ten ticks bound the error to a tenth of a core per process; at the default 10 Hz
# the window is the sample period, as before.
CPU_WINDOW_S = 0.1


@dataclass
class _TreeState:
    cpu_s: dict[int, float] = field(default_factory=dict)
    procs: dict[int, psutil.Process] = field(default_factory=dict)
    thread_names: dict[int, str] = field(default_factory=dict)
    names_read_at: float = 0.0
    root_pid: int | None = None
    scanned_ns: int = 0
    born_since_last_scan: set[int] = field(default_factory=set)
    pss: dict[int, tuple[float, int | None]] = field(default_factory=dict)  # pid -> (read at, bytes)


CLK_TCK = os.sysconf("SC_CLK_TCK")
PSS_EVERY_S = 1.0


def read_pss(pid: int) -> int | None:
    """A process's proportional set size in bytes (/proc/PID/smaps_rollup, Linux 4.14+), or None."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _age_s(pid: int) -> float | None:
    """Seconds since `pid` started, on the kernel's own clocks (CLOCK_BOOTTIME against the start in
    ticks in /proc/PID/stat): exact to a tick, where psutil's create_time rounds the boot time to a
    whole second. None when it cannot be read (the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            after_name = f.read().rsplit(b")", 1)[1].split()
        start_ticks = int(after_name[19])  # field 22, starttime; the fields after the name start at 3
    except (OSError, ValueError, IndexError):
        return None
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / CLK_TCK


def _unknown_children(procs: dict[int, psutil.Process]) -> bool:
    """Whether the main thread of a known process has a child not among them, from the kernel's
    `/proc/PID/task/PID/children` (one small read per process: no walk of the whole process table). A
    fork from another thread, or a kernel without that file, waits for the next rescan as before."""
    for pid in procs:
        try:
            with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
                if any(int(child) not in procs for child in f.read().split()):
                    return True
        except (OSError, ValueError):
            continue
    return False


@dataclass
class _Gaps:
    """The gaps between samples as running figures (count, sum, largest), however long the run."""

    samples: int = 0
    count: int = 0
    total_ns: int = 0
    max_ns: int = 0
    last_ns: int | None = None

    def add(self, t_ns: int) -> None:
        if self.last_ns is not None:
            gap = t_ns - self.last_ns
            self.count += 1
            self.total_ns += gap
            self.max_ns = max(self.max_ns, gap)
        self.samples += 1
        self.last_ns = t_ns


class Sampler:
    """Runs in its own thread in the tracer process; `target_pid()` says which process to watch
    (it may change: under nsys the training process is a grandchild whose pid appears later)."""

    def __init__(
        self,
        folder: RunFolder,
        target_pid: Callable[[], int | None],
        hz: float,
        nvml: Nvml | None,
        rapl: RaplReader | None = None,
    ):
        self.folder = folder
        self.rapl = rapl
        self.target_pid = target_pid
        self.period_s = 1.0 / hz if hz > 0 else 0.0
        self.hz = hz
        self.nvml = nvml
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracer-sampler", daemon=True)
        self._state = _TreeState()
        self._gaps = _Gaps()  # running figures of the sampling period: nothing kept per sample
        self._ncpu = psutil.cpu_count() or 1
        self._ram_total = psutil.virtual_memory().total
        self._cpu_total_s = 0.0  # the tree's CPU seconds summed over every sample's deltas
        self._cpu_marks: deque[tuple[float, float]] = deque()  # (monotonic s, _cpu_total_s) within a window
        self._per_core: list[float] = []
        self._per_core_at = 0.0
        self.error: str | None = None
        self.cpu_s = 0.0  # the sampler thread's own CPU time (time.thread_time), the cost of measuring
        self.wall_s = 0.0

    def start(self) -> None:
        """With hz == 0 nothing is sampled: the baseline of the sampler-overhead benchmark."""
        if self.hz <= 0:
            return
        psutil.cpu_percent(percpu=True)
        self._thread.start()

    def stop(self) -> SamplingInfo:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return self.sampling_info()

    def sampling_info(self) -> SamplingInfo:
        gaps = self._gaps
        mean_ms = gaps.total_ns / gaps.count / 1e6 if gaps.count else 0.0
        return SamplingInfo(
            requested_hz=self.hz,
            achieved_period_ms=round(mean_ms, 3),
            samples=gaps.samples,
            max_gap_ms=round(gaps.max_ns / 1e6, 3) if gaps.count else 0.0,
            sampler_cpu_s=round(self.cpu_s, 6),
            sampler_wall_s=round(self.wall_s, 6),
        )

    def _run(self) -> None:
        streams: dict[str, CsvStream] = {}
        cpu_start, wall_start = time.thread_time(), time.monotonic()
        try:  # a full disk (ENOSPC) at any point stops sampling with a recorded cause, never a traceback
            for t in (schema.PROCESS, schema.THREADS_TABLE, schema.CORES):
                streams[t.name] = self.folder.sample_stream(t.name)
            if self.nvml is not None:
                streams[schema.GPUS.name] = self.folder.sample_stream(schema.GPUS.name)
            if self.rapl is not None:
                streams[schema.RAPL.name] = self.folder.sample_stream(schema.RAPL.name)
            next_tick = time.monotonic()
            last_flush = next_tick
            while not self._stop.is_set():
                self._sample(streams)
                now = time.monotonic()
                if now - last_flush >= FLUSH_EVERY_S:
                    for s in streams.values():
                        s.flush()
                    last_flush = now
                next_tick += self.period_s
                if next_tick < now:  # fell behind: skip missed ticks rather than burst
                    next_tick = now + self.period_s
                self._stop.wait(next_tick - now)
            self._sample(streams)
        except Exception as e:  # noqa: BLE001 - the run goes on; the cause is recorded
            self.error = f"{type(e).__name__}: {e}"
        finally:
            for s in streams.values():
                try:
                    s.close()
                except OSError as e:
                    self.error = self.error or f"{type(e).__name__}: {e}"
            self.cpu_s = time.thread_time() - cpu_start
            self.wall_s = time.monotonic() - wall_start

    def _tree(self, pid: int, now_ns: int) -> list[psutil.Process]:
        """The watched process and its descendants. Finding descendants means reading every process on
        the machine (psutil's `children()`: 70 % of a sample's cost on a busy host), so the tree is
        rescanned every TREE_RESCAN_S and the known processes are reused in between, unless a known
        process's main thread has forked a child since (a DataLoader's workers): found a second later,
        a child's whole CPU time so far landed in one window (151 % of all cores, on a PyTorch run)."""
        state = self._state
        recent = now_ns - state.scanned_ns < TREE_RESCAN_S * 1e9
        if state.root_pid == pid and recent and not _unknown_children(state.procs):
            return list(state.procs.values())
        try:
            root = state.procs.get(pid) or psutil.Process(pid)
            found = [root] + root.children(recursive=True)
        except psutil.Error:
            return []
        procs = []
        for p in found:
            known = state.procs.get(p.pid)
            procs.append(known if known is not None and known.create_time() == p.create_time() else p)
        # Not there at the last scan of this tree: born since (psutil's create_time cannot tell, it is
        # only as exact as the boot time's whole second).
        earlier = set(state.procs) if state.root_pid == pid else None
        state.procs = {p.pid: p for p in procs}
        state.born_since_last_scan = set(state.procs) - earlier if earlier is not None else set()
        state.root_pid, state.scanned_ns = pid, now_ns
        return procs

    def _sample(self, streams: dict[str, CsvStream]) -> None:
        t_ns = time.time_ns()
        pid = self.target_pid()
        procs = self._tree(pid, t_ns) if pid else []
        mono = time.monotonic()  # after the tree scan, whose length varies: the CPU times are read from here
        cpu_delta_s, rss, threads, live = 0.0, 0, 0, 0
        pss: int | None = 0
        ctx_vol, ctx_invol = 0, 0
        refresh_names = mono - self._state.names_read_at >= THREAD_NAME_REFRESH_S
        new_cpu: dict[int, float] = {}
        new_threads: list[int] = []  # names of threads no longer there are forgotten at each name refresh
        for p in procs:
            try:
                with p.oneshot():
                    if p.status() == psutil.STATUS_ZOMBIE:  # exited, not yet reaped: nothing to measure
                        continue
                    times = p.cpu_times()
                    mem = p.memory_info()
                    nthreads = p.num_threads()
                    thread_times = p.threads()
                    ctx = p.num_ctx_switches()
            except psutil.Error:
                continue
            if mem.rss == 0:  # mid-exit: its memory is already released
                continue
            live += 1
            total = times.user + times.system
            prev = self._state.cpu_s.get(p.pid)
            if prev is not None:
                cpu_delta_s += max(0.0, total - prev)
            elif p.pid in self._state.born_since_last_scan:
                cpu_delta_s += total * self._share_since_last_read(p.pid, mono)
            new_cpu[p.pid] = total
            rss += mem.rss
            own_pss = self._pss(p.pid, mono)
            pss = None if pss is None or own_pss is None else pss + own_pss
            threads += nthreads
            ctx_vol += ctx.voluntary
            ctx_invol += ctx.involuntary
            new_threads.extend(th.id for th in thread_times)
            for th in thread_times:
                streams[schema.THREADS_TABLE.name].append(
                    (t_ns, p.pid, th.id, self._thread_name(p.pid, th.id, refresh_names), th.user_time, th.system_time)
                )
        if refresh_names:
            self._state.names_read_at = mono
            seen = set(self._state.thread_names) & set(new_threads)
            self._state.thread_names = {tid: self._state.thread_names[tid] for tid in seen}
        self._state.cpu_s = new_cpu
        self._state.pss = {pid: v for pid, v in self._state.pss.items() if pid in new_cpu}
        cores = self._cores_over_window(mono, time.monotonic(), cpu_delta_s)
        vm = psutil.virtual_memory()
        if mono - self._per_core_at >= CPU_WINDOW_S or not self._per_core:  # the same ticks, machine-wide
            self._per_core, self._per_core_at = psutil.cpu_percent(percpu=True), mono
        per_core = self._per_core
        if live:
            self._append_process_row(
                streams[schema.PROCESS.name], t_ns, cores, (rss, pss), threads, live, per_core, vm, (ctx_vol, ctx_invol)
            )
        for core, pct in enumerate(per_core):
            streams[schema.CORES.name].append((t_ns, core, pct))
        if self.nvml is not None:
            pids = {p.pid for p in procs}
            for i in range(len(self.nvml.handles)):
                r = self.nvml.read(i, pids)
                streams[schema.GPUS.name].append(
                    (
                        t_ns,
                        r.gpu,
                        r.util_pct,
                        r.mem_util_pct,
                        r.mem_used_mib,
                        r.mem_total_mib,
                        r.power_w,
                        r.energy_mj,
                        r.temp_c,
                        r.proc_mem_mib,
                    )
                )
        if self.rapl is not None:
            self.rapl.append(streams[schema.RAPL.name], t_ns)
        self._gaps.add(t_ns)

    def _pss(self, pid: int, now: float) -> int | None:
        """The process's PSS, read again once PSS_EVERY_S has passed since its last read."""
        last = self._state.pss.get(pid)
        if last is not None and now - last[0] < PSS_EVERY_S:
            return last[1]
        value = read_pss(pid)
        self._state.pss[pid] = (now, value)
        return value

    def _share_since_last_read(self, pid: int, now: float) -> float:
        """Of a process found since the last tree scan, the share of its CPU time spent since the last
        sample's read (its CPU taken as spread evenly over its life). A process forked by a thread other
        than its parent's main one is found only at the next rescan (`_unknown_children`), up to
        TREE_RESCAN_S late: nsys starts a user's command so, and its second of start-up landed in one
        100 ms window (2.7 cores read on a 2-core machine). What it spent before that read is not put in
        this window: those earlier readings stay low rather than this one reading high."""
        age = _age_s(pid)
        if not self._cpu_marks or age is None or age <= 0:
            return 1.0
        return min(1.0, max(0.0, now - self._cpu_marks[-1][0]) / age)

    def _cores_over_window(self, read_from: float, read_to: float, cpu_delta_s: float) -> float:
        """Cores busy over the last CPU_WINDOW_S at least (from the newest sample that old), not over
        the last sample period alone. The CPU times were read between `read_from` and `read_to`: the span
        is taken from the start of the oldest read to the end of this one, so a sampler thread that waits
        for a core mid-read (a busy machine) reads low, never above what the tree could burn. In the first
        CPU_WINDOW_S of a run the span is shorter than a window, and one clock tick over the 3 ms since the
        first read was 3.6 cores of one busy thread: the rate is taken over a whole window at least, so
        the first readings are low rather than high."""
        self._cpu_total_s += cpu_delta_s
        marks = self._cpu_marks
        marks.append((read_from, self._cpu_total_s))
        while len(marks) > 2 and read_from - marks[1][0] >= CPU_WINDOW_S:
            marks.popleft()
        start, total = marks[0]
        return (self._cpu_total_s - total) / max(read_to - start, CPU_WINDOW_S)

    def _thread_name(self, pid: int, tid: int, refresh: bool) -> str:
        name = self._state.thread_names.get(tid)
        if name is None or refresh:
            try:
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            except OSError:
                name = name or ""
            self._state.thread_names[tid] = name
        return name

    def _append_process_row(
        self,
        stream: CsvStream,
        t_ns: int,
        cores: float,
        memory: tuple[int, int | None],
        threads: int,
        live: int,
        per_core: list[float],
        vm: object,
        ctx: tuple[int, int],
    ) -> None:
        rss, pss = memory
        stream.append(
            (
                t_ns,
                round(100.0 * cores / self._ncpu, 3),
                round(cores, 4),
                round(rss / 2**20, 3),
                round(100.0 * rss / self._ram_total, 4),
                threads,
                live,
                round(sum(per_core) / max(len(per_core), 1), 2),
                vm.percent,  # type: ignore[attr-defined]
                round(vm.used / 2**20, 1),  # type: ignore[attr-defined]
                ctx[0],
                ctx[1],
                None if pss is None else round(pss / 2**20, 3),
            )
        )
