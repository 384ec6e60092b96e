"""The thread timeline of a run: what every thread did when, from every source that says so, written
once by the ingest as `<run>/thread_timeline.parquet` (`analyzers.trace.tables.THREAD_TIMELINE_SCHEMA`) and
read by `analyze`'s thread table, the Perfetto export and the viewer's lanes (`analyzers.summaries.threads`).

Sources, all on the Unix ns clock:
- `sampler` (always): the per-thread CPU times the tracer samples. An interval between two samples of
  a thread is `busy` (it used >= BUSY_FRACTION of a core), `active` (>= ACTIVE_FRACTION) or `idle`;
  idle intervals are kept (a lane shows when its thread existed and slept, apart from when it did not
  exist), and neighbouring intervals of one activity are merged. A thread seen at one sample only is
  one zero-length idle row (it existed then; nothing says for how long).
- `nsys` (when OS-runtime calls were traced): each call (pthread_cond_wait, read, ioctl ...), named.
- `pyspy` (raw/pyspy*.json speedscope files): the leaf Python function of each sample, consecutive equal
  samples merged. Speedscope has no absolute time: samples are laid from `raw/pyspy.start_ns` when
  present, else from the run's wall-clock start (placement approximate: one sampling period plus lag).
A thread is known by one name on every row: the last one the sampler saw (threads are renamed after
they start), else the first any other source gave.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.trace import tables as t
from analyzers.trace.arrays import as_array, codes
from tracer.core import arrow_build, reading, schema
from tracer.core import trace_formats as tf
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder

BUSY_FRACTION = 0.5  # of one core
ACTIVE_FRACTION = 0.05
SAMPLE_COLUMNS = (schema.T_NS, schema.PID, schema.TID, schema.THREAD_NAME, schema.USER_S, schema.SYSTEM_S)
_PYSPY_THREAD = re.compile(r"Thread\s+(0x[0-9a-fA-F]+|\d+)(?:\s+\"([^\"]*)\")?")
_PYSPY_PROCESS = re.compile(r"Process\s+(\d+)")
_UNITS_NS = {"seconds": 1e9, "milliseconds": 1e6, "microseconds": 1e3, "nanoseconds": 1.0}


def activity_levels(cpu_delta_s: np.ndarray, dt_ns: np.ndarray) -> np.ndarray:
    """0 (idle), 1 (active) or 2 (busy) per interval (`tables.SAMPLER_ACTIVITIES`), from the CPU
    seconds a thread used in it."""
    dt = dt_ns.astype(np.float64)
    cores = np.where(dt > 0, cpu_delta_s * 1e9 / np.where(dt > 0, dt, 1), 0.0)
    return np.where(cores >= BUSY_FRACTION, 2, np.where(cores >= ACTIVE_FRACTION, 1, 0))


def _table(
    tid: object, pid: object, name: object, start: object, end: object, activity: object, source: str
) -> pa.Table:
    n = len(start)  # type: ignore[arg-type]
    return pa.table(
        [tid, pid, name, start, end, activity, arrow_build.repeated(source, n)],
        schema=t.THREAD_TIMELINE_SCHEMA,
    )


def sampler_intervals(samples: pa.Table | None) -> pa.Table:
    """The sampler's rows of the timeline, vectorised: a lane costs what its changes cost, not its samples."""
    if samples is None or samples.num_rows < 2:
        return t.empty(t.THREAD_TIMELINE_SCHEMA)
    t_ns = as_array(samples.column(schema.T_NS), np.int64)
    tid = as_array(samples.column(schema.TID), np.int64)
    cpu = as_array(samples.column(schema.USER_S), np.float64) + as_array(samples.column(schema.SYSTEM_S), np.float64)
    pid = as_array(samples.column(schema.PID), np.int64)
    order = np.lexsort((t_ns, tid, pid))
    t_ns, tid, pid, cpu = t_ns[order], tid[order], pid[order], cpu[order]
    same = (tid[1:] == tid[:-1]) & (pid[1:] == pid[:-1])
    thread = np.cumsum(np.concatenate(([0], ~same)))
    level = activity_levels(np.diff(cpu), np.diff(t_ns))
    idx = np.flatnonzero(same)  # interval i runs from sample i to i+1 of the same thread
    lane, start, end, lvl = thread[idx], t_ns[idx], t_ns[idx + 1], level[idx]
    if len(idx):
        change = np.ones(len(idx), dtype=bool)
        change[1:] = (lane[1:] != lane[:-1]) | (lvl[1:] != lvl[:-1]) | (start[1:] != end[:-1])
        starts = np.flatnonzero(change)
        ends = np.append(starts[1:], len(idx)) - 1
        lane, lvl, start, end = lane[starts], lvl[starts], start[starts], end[ends]
    last = np.append(np.flatnonzero(~same), len(tid) - 1)  # each thread's last sample
    once = np.flatnonzero(np.diff(np.concatenate(([-1], last))) == 1)  # threads seen at one sample only
    if len(once):  # a zero-length row: the thread existed then, for how long is unknown
        lane = np.concatenate([lane, once])
        start = np.concatenate([start, t_ns[last[once]]])
        end = np.concatenate([end, t_ns[last[once]]])
        lvl = np.concatenate([lvl, np.zeros(len(once), dtype=lvl.dtype)])
    name_code, words = codes(samples.column(schema.THREAD_NAME))
    names = np.asarray(words, dtype=object)[name_code[order[last]]]
    activity = np.asarray(t.SAMPLER_ACTIVITIES, dtype=object)[lvl]
    return _table(
        tid[last][lane], pid[last][lane], names[lane].tolist(), start, end, activity.tolist(), t.SOURCE_SAMPLER
    )


def osrt_intervals(folder: RunFolder) -> pa.Table:
    """Each traced OS-runtime call as a row (nsys's OSRT table, as the ingest wrote it)."""
    path = folder.table_path(t.OSRT)
    if not t.present(folder, t.OSRT):
        return t.empty(t.THREAD_TIMELINE_SCHEMA)
    table = reading.parquet(path)
    return (
        t.plain(table, t.OSRT_SCHEMA)
        .select(["tid", "pid", "thread_name", "start_ns", "end_ns", "name"])
        .rename_columns(t.THREAD_TIMELINE_SCHEMA.names[:-1])
        .append_column("source", arrow_build.repeated(t.SOURCE_NSYS, table.num_rows))
    )


def pyspy_files(folder: RunFolder) -> list[Path]:
    raw = folder.raw_dir
    return sorted(p for p in raw.iterdir() if tf.is_pyspy(p.name)) if raw.is_dir() else []


def _pyspy_start_ns(folder: RunFolder) -> int:
    marker = folder.raw_dir / tf.PYSPY_START
    if marker.exists():
        try:
            return int(marker.read_text().strip())
        except ValueError:
            pass
    try:
        return folder.read_record().wall_start_ns
    except UserError:
        return 0


def parse_speedscope(path: Path, start_ns: int, pid: int = -1) -> pa.Table:
    """py-spy's speedscope JSON: one sampled profile per thread, weights in its unit. A profile that names
    no process is the one py-spy attached to, `pid` (the worker's): the samples join its thread rows."""
    try:
        doc = json.loads(path.read_text())
        frames = doc["shared"]["frames"]
        profiles = doc["profiles"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{path}: not a speedscope profile ({e})") from None
    cols: tuple[list[object], ...] = ([], [], [], [], [], [])  # tid, pid, name, start, end, activity
    for prof in profiles:
        if prof.get("type") != "sampled":
            continue
        label = str(prof.get("name", ""))
        m = _PYSPY_THREAD.search(label)
        pm = _PYSPY_PROCESS.search(label)
        tid, name = (int(m.group(1), 0), m.group(2) or "") if m else (-1, label)
        prof_pid = int(pm.group(1)) if pm else pid
        unit = _UNITS_NS.get(str(prof.get("unit", "seconds")), 1e9)
        clock = float(prof.get("startValue", 0)) * unit
        for stack, weight in zip(prof.get("samples", []), prof.get("weights", [])):
            dur = float(weight) * unit
            leaf = frames[stack[-1]]["name"] if stack else "<idle>"
            s_ns, e_ns = start_ns + int(clock), start_ns + int(clock + dur)
            clock += dur
            if cols[4] and cols[0][-1] == tid and cols[5][-1] == leaf and cols[4][-1] == s_ns:
                cols[4][-1] = e_ns
                continue
            for col, value in zip(cols, (tid, prof_pid, name, s_ns, e_ns, leaf)):
                col.append(value)
    return _table(cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], t.SOURCE_PYSPY)


def pyspy_intervals(folder: RunFolder) -> pa.Table:
    files = pyspy_files(folder)
    if not files:
        return t.empty(t.THREAD_TIMELINE_SCHEMA)
    start = _pyspy_start_ns(folder)
    try:
        pid = folder.read_record().worker_pid or -1
    except UserError:
        pid = -1
    return pa.concat_tables([parse_speedscope(p, start, pid) for p in files])


def one_name_per_thread(table: pa.Table) -> pa.Table:
    """Every row of a thread named alike: the sampler's (last) name, else the first other source's."""
    if table.num_rows == 0:
        return table
    key = as_array(table.column("pid"), np.int64) * (1 << 32) + as_array(table.column("tid"), np.int64)
    name_code, words = codes(table.column("thread_name"))
    named = np.asarray([bool(w) for w in words], dtype=bool)[name_code]
    sampler = as_array(pc.equal(table.column("source"), t.SOURCE_SAMPLER).cast(pa.int8()), np.int8).astype(bool)
    keys, thread = np.unique(key, return_inverse=True)
    thread = thread.ravel()
    chosen = np.full(len(keys), -1, dtype=np.int64)
    for pick in (named & ~sampler, named & sampler):  # the sampler's name wins: written last
        rows = np.flatnonzero(pick)
        _, first = np.unique(thread[rows], return_index=True)
        chosen[thread[rows[first]]] = name_code[rows[first]]
    words.append("")
    chosen[chosen < 0] = len(words) - 1
    names = np.asarray(words, dtype=object)[chosen[thread]]
    return table.set_column(
        table.schema.get_field_index("thread_name"), "thread_name", pa.array(names.tolist(), pa.string())
    )


def build(folder: RunFolder) -> pa.Table:
    """Every source's rows, sorted by process, thread and start."""
    samples = folder.samples(schema.THREADS_TABLE.name)
    parts = [sampler_intervals(samples), osrt_intervals(folder), pyspy_intervals(folder)]
    table = one_name_per_thread(pa.concat_tables([p.cast(t.THREAD_TIMELINE_SCHEMA) for p in parts]))
    return table.sort_by([("pid", "ascending"), ("tid", "ascending"), ("start_ns", "ascending")])


def write(folder: RunFolder) -> bool:
    """Writes `<run>/thread_timeline.parquet` atomically; False (nothing written) where no source has a row."""
    table = build(folder)
    if table.num_rows == 0:
        return False
    path = folder.table_path(t.THREAD_TIMELINE)
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return True
