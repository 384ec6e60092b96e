"""Framework operators (PyTorch profiler `cpu_op` events) summed per name, as the PyTorch profiler's
`key_averages()` table does: calls, total time (the operator and everything it called) and self time
(minus the operators nested in it on the same thread), largest self time first.

Nesting is read from the intervals of one thread: an event that starts inside another and ends by its
end is its child (Kineto writes complete events; parents enclose their children)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pyarrow.parquet as pq

from analyzers.run.run import Run
from analyzers.trace import tables as t


@dataclass(frozen=True)
class OperatorRow:
    name: str
    calls: int
    self_ns: int
    self_pct: float  # of all operators' self time in the window
    total_ns: int
    avg_total_ns: float


def operator_summary(folder: Run, start_ns: int | None = None, end_ns: int | None = None) -> list[OperatorRow]:
    """Operators that start inside [start_ns, end_ns) (the whole trace when not given)."""
    path = folder.table_file(t.OPERATORS)
    if not t.present(folder, t.OPERATORS):
        return []
    table = pq.read_table(path, columns=["start_ns", "end_ns", "name", "pid", "tid"])
    order = [("pid", "ascending"), ("tid", "ascending"), ("start_ns", "ascending"), ("end_ns", "descending")]
    rows = table.sort_by(order).to_pylist()  # at one start the enclosing event first, in any file order
    lo = start_ns if start_ns is not None else -(1 << 62)
    hi = end_ns if end_ns is not None else 1 << 62
    calls: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    child: list[int] = [0] * len(rows)  # time of each event's direct children
    stack: list[int] = []  # indices of the open events of the current thread
    thread = None
    for i, r in enumerate(rows):
        if (r["pid"], r["tid"]) != thread:
            thread, stack = (r["pid"], r["tid"]), []
        while stack and rows[stack[-1]]["end_ns"] <= r["start_ns"]:
            stack.pop()
        if stack:
            parent = rows[stack[-1]]
            child[stack[-1]] += min(r["end_ns"], parent["end_ns"]) - r["start_ns"]
        stack.append(i)
    selfs: dict[str, int] = defaultdict(int)
    for i, r in enumerate(rows):
        if not lo <= r["start_ns"] < hi:
            continue
        dur = r["end_ns"] - r["start_ns"]
        calls[r["name"]] += 1
        total[r["name"]] += dur
        selfs[r["name"]] += max(0, dur - child[i])
    whole = sum(selfs.values()) or 1
    out = [
        OperatorRow(name, calls[name], selfs[name], 100.0 * selfs[name] / whole, total[name], total[name] / calls[name])
        for name in calls
    ]
    return sorted(out, key=lambda o: (-o.self_ns, o.name))
