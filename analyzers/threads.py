"""Per-thread timelines: when each thread of the training process ran, and what it did.

Sources, all on the Unix ns clock:
- `sampler` (always): the per-thread CPU times the tracer samples; an interval between two samples is
  `busy` (the thread used >= BUSY_FRACTION of a core), `active` (>= ACTIVE_FRACTION) or idle (left out);
  neighbouring intervals of one activity merged. The viewer's lanes use the same rule (`activity_levels`).
- `nsys` (when OSRT was traced): each OS-runtime call (pthread_cond_wait, read, ioctl ...), named; what a
  call means for the thread (waiting, io, driver) is `osrt_kind`.
- `pyspy` (when `raw/pyspy*.json` speedscope files exist): the leaf Python function of each sample,
  consecutive equal samples merged. py-spy's speedscope output has no absolute time: its samples
  are laid from `raw/pyspy.start_ns` (a file holding one integer) when present, else from the run's
  wall-clock start, so treat their placement as approximate (±1 sampling period plus start-up lag).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from analyzers import tables as t
from tracer.core import schema
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder

# Thread activity from sampled CPU time: the one rule (analyze's thread table and the viewer's lanes).
IDLE, ACTIVE, BUSY = "idle", "active", "busy"
ACTIVITY_LEVELS = (IDLE, ACTIVE, BUSY)  # index = level
BUSY_FRACTION = 0.5  # of one core
ACTIVE_FRACTION = 0.05

# nsys OS-runtime calls by what a thread in them is doing; a lane shows the kind, not each call's name
OSRT_KINDS: dict[str, tuple[str, ...]] = {
    "waiting": (
        "poll", "ppoll", "select", "pselect", "epoll_wait", "epoll_pwait", "pthread_cond_wait",
        "pthread_cond_timedwait", "pthread_mutex_lock", "pthread_rwlock_rdlock", "pthread_rwlock_wrlock",
        "pthread_join", "sem_wait", "sem_timedwait", "nanosleep", "usleep", "sleep", "clock_nanosleep", "futex",
        "wait", "waitpid", "sched_yield",
    ),
    "io": (
        "read", "write", "pread", "pread64", "pwrite", "pwrite64", "readv", "writev", "fread", "fwrite", "fgets",
        "fputs", "fflush", "open", "open64", "openat", "openat64", "fopen", "fopen64", "close", "fclose", "stat",
        "stat64", "lstat", "lstat64", "fstat", "fstat64", "fileno", "mmap", "mmap64", "munmap", "dup", "dup2",
        "fcntl", "fcntl64", "pipe", "pipe2", "socket", "bind", "connect", "listen", "accept", "accept4", "send",
        "sendto", "sendmsg", "recv", "recvfrom", "recvmsg", "shutdown",
    ),
    "driver (ioctl)": ("ioctl",),
}  # fmt: skip
KIND_OF_OSRT = {call: kind for kind, calls in OSRT_KINDS.items() for call in calls}
OTHER_OSRT = "other OS call"
PYTHON = "python"


def activity_levels(cpu_delta_s: np.ndarray, dt_ns: np.ndarray) -> np.ndarray:
    """0 (idle), 1 (active) or 2 (busy) per interval, from the CPU seconds a thread used in it."""
    dt = dt_ns.astype(np.float64)
    cores = np.where(dt > 0, cpu_delta_s * 1e9 / np.where(dt > 0, dt, 1), 0.0)
    return np.where(cores >= BUSY_FRACTION, 2, np.where(cores >= ACTIVE_FRACTION, 1, 0))


def activity_kind(activity: str, source: str) -> str:
    """What a timeline interval shows as: the sampler's level as it is, an OS-runtime call as its kind
    (waiting, io, driver, other), a py-spy sample as `python`."""
    if source == "pyspy":
        return PYTHON
    if source == "nsys":
        return KIND_OF_OSRT.get(activity, OTHER_OSRT)
    return activity


NO_THREAD = 0  # tid 0 is no thread of the process: nsys puts process-wide events there (shown as "[Unknown]")
_PYSPY_THREAD = re.compile(r"Thread\s+(0x[0-9a-fA-F]+|\d+)(?:\s+\"([^\"]*)\")?")
_PYSPY_PROCESS = re.compile(r"Process\s+(\d+)")


@dataclass(frozen=True)
class ThreadRow:
    """One thread: CPU seconds it used (sampler), time seen busy, time in OS-runtime calls, and
    what it did most (the OSRT call or Python function with the most time)."""

    pid: int
    tid: int
    thread_name: str
    cpu_s: float
    active_ns: int
    osrt_ns: int
    top_osrt: str
    pyspy_ns: int
    top_python: str


def _empty() -> dict[str, list[Any]]:
    return {name: [] for name in t.THREAD_TIMELINE_SCHEMA.names}


def sampler_intervals(threads: pa.Table | None) -> dict[str, list[Any]]:
    """Merged intervals where a thread was `active` or `busy` (`activity_levels`) between two samples."""
    out = _empty()
    if threads is None or threads.num_rows == 0:
        return out
    tid = threads["tid"].to_numpy()
    pid = threads["pid"].to_numpy()
    t_ns = threads["t_ns"].to_numpy().astype(np.int64)
    cpu = threads[schema.USER_S].to_numpy().astype(float) + threads[schema.SYSTEM_S].to_numpy().astype(float)
    names = threads["name"].to_pylist()
    order = np.lexsort((t_ns, tid))
    tid, pid, t_ns, cpu = tid[order], pid[order], t_ns[order], cpu[order]
    names = [names[i] for i in order]
    levels = np.concatenate(([0], activity_levels(np.diff(cpu), np.diff(t_ns)))) if len(order) else np.array([])
    for i in range(1, len(order)):
        if tid[i] != tid[i - 1] or pid[i] != pid[i - 1] or levels[i] == 0:
            continue
        start, end, activity = int(t_ns[i - 1]), int(t_ns[i]), ACTIVITY_LEVELS[int(levels[i])]
        if (
            out["end_ns"]
            and out["tid"][-1] == tid[i]
            and out["pid"][-1] == pid[i]
            and out["end_ns"][-1] == start
            and out["activity"][-1] == activity
        ):
            out["end_ns"][-1] = end
            continue
        out["tid"].append(int(tid[i]))
        out["pid"].append(int(pid[i]))
        out["thread_name"].append(str(names[i] or ""))
        out["start_ns"].append(start)
        out["end_ns"].append(end)
        out["activity"].append(activity)
        out["source"].append("sampler")
    return out


def osrt_intervals(folder: RunFolder) -> dict[str, list[Any]]:
    out = _empty()
    path = folder.table_path(t.OSRT)
    if not path.exists():
        return out
    table = pq.ParquetFile(path).read()  # not read_table: its pyarrow.dataset import brings pandas (0.2 s)
    out["tid"] = table["tid"].to_pylist()
    out["pid"] = table["pid"].to_pylist()
    out["thread_name"] = table["thread_name"].to_pylist()
    out["start_ns"] = table["start_ns"].to_pylist()
    out["end_ns"] = table["end_ns"].to_pylist()
    out["activity"] = table["name"].to_pylist()
    out["source"] = ["nsys"] * table.num_rows
    return out


def pyspy_files(folder: RunFolder) -> list[Path]:
    raw = folder.raw_dir
    if not raw.is_dir():
        return []
    return sorted(p for p in raw.glob("pyspy*") if p.suffix == ".json" or p.name.endswith(".speedscope"))


def _pyspy_start_ns(folder: RunFolder) -> int:
    marker = folder.raw_dir / "pyspy.start_ns"
    if marker.exists():
        try:
            return int(marker.read_text().strip())
        except ValueError:
            pass
    try:
        return folder.read_record().wall_start_ns
    except UserError:
        return 0


def parse_speedscope(path: Path, start_ns: int) -> dict[str, list[Any]]:
    """py-spy's speedscope JSON: one sampled profile per thread, weights in seconds."""
    out = _empty()
    try:
        doc = json.loads(path.read_text())
        frames = doc["shared"]["frames"]
        profiles = doc["profiles"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{path}: not a speedscope profile ({e})") from None
    scale = {"seconds": 1e9, "milliseconds": 1e6, "microseconds": 1e3, "nanoseconds": 1.0}
    for prof in profiles:
        if prof.get("type") != "sampled":
            continue
        label = str(prof.get("name", ""))
        m = _PYSPY_THREAD.search(label)
        tid = int(m.group(1), 0) if m else -1
        tname = (m.group(2) or "") if m else label
        pm = _PYSPY_PROCESS.search(label)
        pid = int(pm.group(1)) if pm else -1
        unit = scale.get(str(prof.get("unit", "seconds")), 1e9)
        clock = float(prof.get("startValue", 0)) * unit
        for stack, weight in zip(prof.get("samples", []), prof.get("weights", [])):
            dur = float(weight) * unit
            leaf = frames[stack[-1]]["name"] if stack else "<idle>"
            s_ns, e_ns = start_ns + int(clock), start_ns + int(clock + dur)
            clock += dur
            if out["end_ns"] and out["tid"][-1] == tid and out["activity"][-1] == leaf and out["end_ns"][-1] == s_ns:
                out["end_ns"][-1] = e_ns
                continue
            for k, v in (("tid", tid), ("pid", pid), ("thread_name", tname), ("start_ns", s_ns), ("end_ns", e_ns)):
                out[k].append(v)
            out["activity"].append(leaf)
            out["source"].append("pyspy")
    return out


def _timeline_columns(folder: RunFolder) -> dict[str, list[Any]]:
    """Every source's intervals as plain columns, in no order."""
    parts = [sampler_intervals(folder.samples("threads")), osrt_intervals(folder)]
    start = _pyspy_start_ns(folder) if pyspy_files(folder) else 0
    parts += [parse_speedscope(p, start) for p in pyspy_files(folder)]
    cols = _empty()
    for part in parts:
        for k in cols:
            cols[k].extend(part[k])
    return cols


def thread_timeline(folder: RunFolder) -> pa.Table:
    """tid, pid, thread_name, start_ns, end_ns, activity, source; sorted by thread, then time."""
    table = pa.table(_timeline_columns(folder), schema=t.THREAD_TIMELINE_SCHEMA)
    return table.sort_by([("pid", "ascending"), ("tid", "ascending"), ("start_ns", "ascending")])


def thread_summary(folder: RunFolder, start_ns: int | None = None, end_ns: int | None = None) -> list[ThreadRow]:
    """One row per thread seen by any source, busiest (CPU seconds, then OSRT time) first; between
    `start_ns` and `end_ns` when given (a phase): CPU seconds are the growth of the thread's CPU time
    over the samples inside it, timeline intervals are clipped to it."""
    lo = start_ns if start_ns is not None else -(1 << 62)
    hi = end_ns if end_ns is not None else 1 << 62
    first_cpu: dict[tuple[int, int], float] = {}
    cpu_s: dict[tuple[int, int], float] = {}
    names: dict[tuple[int, int], str] = {}
    samples = folder.samples("threads")
    whole = start_ns is None and end_ns is None
    if samples is not None and samples.num_rows:
        for r in samples.select(["t_ns", "pid", "tid", "name", schema.USER_S, schema.SYSTEM_S]).to_pylist():
            if not lo <= int(r["t_ns"]) <= hi:
                continue
            key = (int(r["pid"]), int(r["tid"]))
            cpu = float(r[schema.USER_S] or 0) + float(r[schema.SYSTEM_S] or 0)
            first_cpu.setdefault(key, 0.0 if whole else cpu)  # a phase counts from its first sample
            cpu_s[key] = max(cpu_s.get(key, 0.0), cpu - first_cpu[key])
            names[key] = str(r["name"] or names.get(key, ""))
    cols = _timeline_columns(folder)  # summed per thread: no order (nor Arrow table) needed
    timeline = [dict(zip(cols, row)) for row in zip(*cols.values())]
    per: dict[tuple[int, int], dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    for r in timeline:
        key = (r["pid"], r["tid"])
        overlap = min(r["end_ns"], hi) - max(r["start_ns"], lo)
        if overlap <= 0:
            continue
        per[key][r["source"]][r["activity"]] += overlap
        if r["thread_name"] and not names.get(key):
            names[key] = r["thread_name"]
    rows = []
    for key in set(per) | set(cpu_s):
        if key[1] == NO_THREAD:
            continue
        src = per.get(key, {})
        osrt = src.get("nsys", {})
        py = src.get("pyspy", {})
        rows.append(
            ThreadRow(
                pid=key[0],
                tid=key[1],
                thread_name=names.get(key, ""),
                cpu_s=cpu_s.get(key, 0.0),
                active_ns=int(sum(src.get("sampler", {}).values())),
                osrt_ns=int(sum(osrt.values())),
                top_osrt=max(osrt, key=lambda k: osrt[k]) if osrt else "",
                pyspy_ns=int(sum(py.values())),
                top_python=max(py, key=lambda k: py[k]) if py else "",
            )
        )
    return sorted(rows, key=lambda r: (-r.cpu_s, -r.osrt_ns, r.pid, r.tid))
