"""Per-thread timelines: when each thread of the training process ran, and what it did.

The timeline itself is one table, made once by the ingest (`analyzers.ingest.threads`, which says
where its rows come from and which rules it applies) and read here, by `export-trace` and by the viewer's
lanes (`analyzers.timeline.lanes`). This module says what a row shows as (`activity_kind`: an OS-runtime call by
what a thread in it is doing) and sums the table per thread (`thread_summary`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from analyzers.run.run import Run
from analyzers.summaries.rows import ThreadRow, shown
from analyzers.trace import tables as t
from analyzers.trace.arrays import as_array
from tracer.core import reading, schema

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


def activity_kind(activity: str, source: str) -> str:
    """What a timeline row shows as: the sampler's level as it is, an OS-runtime call as its kind
    (waiting, io, driver, other), a py-spy sample as `python`."""
    if source == t.SOURCE_PYSPY:
        return PYTHON
    if source == t.SOURCE_NSYS:
        return KIND_OF_OSRT.get(activity, OTHER_OSRT)
    return activity


def thread_timeline(folder: Run) -> pa.Table:
    """The run's thread timeline (`tables.THREAD_TIMELINE_SCHEMA`, sorted by pid, tid, start): the
    ingest's table, or, for a folder ingested before there was one (or read-only), made the same way."""
    path = folder.table_file(t.THREAD_TIMELINE)
    if t.present(folder, t.THREAD_TIMELINE):  # a damaged one is made again, as for a read-only folder
        return reading.parquet(path)
    from analyzers.ingest import threads

    return threads.build(folder)


def _cpu_seconds(folder: Run, lo: int, hi: int, whole: bool) -> dict[tuple[int, int], float]:
    """CPU seconds per thread: its cumulative CPU time, grown over the samples between `lo` and `hi`."""
    samples = folder.samples(schema.THREADS_TABLE.name)
    out: dict[tuple[int, int], float] = {}
    if samples is None or samples.num_rows == 0:
        return out
    first: dict[tuple[int, int], float] = {}
    for r in samples.select([schema.T_NS, schema.PID, schema.TID, schema.USER_S, schema.SYSTEM_S]).to_pylist():
        if not lo <= int(r[schema.T_NS]) <= hi:
            continue
        key = (int(r[schema.PID]), int(r[schema.TID]))
        cpu = float(r[schema.USER_S] or 0) + float(r[schema.SYSTEM_S] or 0)
        first.setdefault(key, 0.0 if whole else cpu)  # a phase counts from its first sample
        out[key] = max(out.get(key, 0.0), cpu - first[key])
    return out


def thread_summary(folder: Run, start_ns: int | None = None, end_ns: int | None = None) -> list[ThreadRow]:
    """One row per thread seen by any source, busiest (CPU seconds, then OSRT time) first; between
    `start_ns` and `end_ns` when given (a phase): CPU seconds are the growth of the thread's CPU time
    over the samples inside it, timeline rows are clipped to it."""
    lo = start_ns if start_ns is not None else -(1 << 62)
    hi = end_ns if end_ns is not None else 1 << 62
    cpu_s = _cpu_seconds(folder, lo, hi, start_ns is None and end_ns is None)
    timeline = thread_timeline(folder)
    overlap = np.minimum(as_array(timeline.column("end_ns"), np.int64), hi) - np.maximum(
        as_array(timeline.column("start_ns"), np.int64), lo
    )
    keep = overlap > 0
    sums = (
        timeline.select(["pid", "tid", "thread_name", "source", "activity"])
        .append_column("overlap_ns", pa.array(overlap))
        .filter(pa.array(keep))
        .group_by(["pid", "tid", "thread_name", "source", "activity"])
        .aggregate([("overlap_ns", "sum")])
        .to_pylist()
    )
    names = {(int(r["pid"]), int(r["tid"])): r["thread_name"] or "" for r in thread_names(timeline)}
    per: dict[tuple[int, int], dict[str, dict[str, int]]] = {}
    for r in sums:
        key = (int(r["pid"]), int(r["tid"]))
        per.setdefault(key, {}).setdefault(r["source"], {})[r["activity"]] = int(r["overlap_ns_sum"])
    rows = []
    for key in set(per) | set(cpu_s):
        if not shown(key[1], names.get(key, "")):
            continue
        src = per.get(key, {})
        osrt, py = src.get(t.SOURCE_NSYS, {}), src.get(t.SOURCE_PYSPY, {})
        sampled = src.get(t.SOURCE_SAMPLER, {})
        rows.append(
            ThreadRow(
                pid=key[0],
                tid=key[1],
                thread_name=names.get(key, ""),
                cpu_s=cpu_s.get(key, 0.0),
                active_ns=sum(ns for a, ns in sampled.items() if a != t.ACTIVITY_IDLE),
                osrt_ns=sum(osrt.values()),
                top_osrt=max(osrt, key=lambda k: osrt[k]) if osrt else "",
                pyspy_ns=sum(py.values()),
                top_python=max(py, key=lambda k: py[k]) if py else "",
            )
        )
    return sorted(rows, key=lambda r: (-r.cpu_s, -r.osrt_ns, r.pid, r.tid))


def thread_names(timeline: pa.Table) -> list[dict[str, Any]]:
    """pid, tid and thread_name of each thread of a timeline (one name per thread: the ingest's rule)."""
    if timeline.num_rows == 0:
        return []
    return (
        timeline.group_by(["pid", "tid"])
        .aggregate([("thread_name", "max")])
        .rename_columns(["pid", "tid", "thread_name"])
        .to_pylist()
    )
