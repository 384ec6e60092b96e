"""Collectives as NCCL users read them, per rank and per kind: calls, bytes, time, algorithm and bus
bandwidth, the time exposed against the time hidden behind compute, and the wait for the last rank's
arrival against the transfer itself.

- Bytes are the trace's own: the `Input Dims` and `Input type` of each host collective (`nccl:all_reduce`,
  `nccl:all_to_all` ... in the `comm_ops` table a Kineto import writes), else the message of the
  `record_param_comms` around it (`In msg nelems` x `dtype`: PyTorch 2.1 and later, shapes recorded or
  not). A trace that records none (nsys, an older import) gives calls and time, and its bytes are "not
  recorded". Under nsys the bytes are NCCL's own NVTX payloads (`analyzers.ingest.nsys_nccl`), where
  the export holds them.
- Time is the collective's GPU kernels (those the kernel classes call communication), found through the
  launches the host op made (the runtime calls on its thread inside it, by correlation id); without host
  ops each communication kernel is one call.
- Bandwidths follow NCCL's definitions (nccl-tests' PERFORMANCE.md): algbw = bytes / time, busbw = algbw x
  `collectives.BUS_FACTOR[kind](n)` (all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n;
  broadcast, reduce, send/receive 1), n the job's world size.
- Wait and transfer: the k-th collective of a kind on every rank is one; it cannot finish before its last
  rank arrives, so on each rank the time from its kernel's start to the last rank's kernel start is waiting
  and the rest is the transfer (TraceLens' `comm_latency` is the shortest rank's time, the same idea).
- Exposed: kernel time not overlapped by any compute kernel on the rank's GPU; hidden: the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers.figures.ranks import _merged, _overlap, ranked_table
from analyzers.run.run import Run
from analyzers.trace import collectives as coll
from analyzers.trace import tables as t

GB = 1e9
"""Bandwidths in GB/s (10^9 bytes), as nccl-tests print them."""


@dataclass(frozen=True)
class Call:
    """One collective on one rank: its kernels' span and time, its payload where the trace records it."""

    rank: int
    kind: str
    index: int  # the index-th call of this kind on this rank (matches the same call on every rank)
    start_ns: int
    end_ns: int
    kernel_ns: int
    bytes: int | None
    hidden_ns: int = 0
    wait_ns: int | None = None  # from its start to the last rank's start (None: not on every rank)


@dataclass(frozen=True)
class CollectiveRow:
    rank: int
    kind: str
    calls: int
    bytes: int | None
    time_s: float
    wait_s: float | None
    transfer_s: float | None
    exposed_s: float
    hidden_s: float
    algbw_gbps: float | None
    busbw_gbps: float | None

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CollectivesTable:
    rows: tuple[CollectiveRow, ...]
    world_size: int
    bytes_from: str  # where the bytes come from, or why they are not recorded

    def to_json(self) -> dict[str, object]:
        return {"world_size": self.world_size, "bytes_from": self.bytes_from, "rows": [r.to_json() for r in self.rows]}


BYTES_FROM_TRACE = (
    "the trace's own sizes of its host collectives (Input Dims x Input type, record_param_comms, "
    "or NCCL's NVTX payloads)"
)
BYTES_NOT_RECORDED = (
    "not recorded (the trace holds no sizes of its collectives: no Input Dims, record_param_comms or NCCL NVTX payload)"
)


def calls(folder: Run) -> list[Call]:
    """Every collective of every rank, with its wait for the last arrival where all ranks have it."""
    kernels = ranked_table(folder, t.KERNELS, ["start_ns", "end_ns", "name", "correlation_id"])
    if kernels is None:
        return []
    ops = ranked_table(folder, coll.COMM_OPS, ["start_ns", "end_ns", "name", "pid", "tid", "bytes"])
    api = ranked_table(folder, t.CUDA_API, ["start_ns", "pid", "tid", "correlation_id"]) if ops is not None else None
    out: list[Call] = []
    for rank in sorted(set(t.rank_of(kernels).to_pylist())):
        mine = t.of_rank(kernels, rank)
        mask = coll.comm_mask(mine["name"])
        comm, work = mine.filter(mask), mine.filter(pc.invert(mask))
        busy = _merged(work["start_ns"].to_numpy(), work["end_ns"].to_numpy())
        rank_ops = t.of_rank(ops, rank) if ops is not None else None
        if rank_ops is not None and rank_ops.num_rows and api is not None:
            made = _from_ops(rank, rank_ops, t.of_rank(api, rank), comm)
        else:
            made = _from_kernels(rank, comm)
        out += [_hidden(c, busy) for c in made]
    return _with_waits(out)


def _from_ops(rank: int, ops: pa.Table, api: pa.Table, comm: pa.Table) -> list[Call]:
    """A call per host op: the communication kernels its thread launched inside it."""
    corr = comm["correlation_id"].to_numpy(zero_copy_only=False)
    k_start = comm["start_ns"].to_numpy(zero_copy_only=False)
    k_end = comm["end_ns"].to_numpy(zero_copy_only=False)
    by_corr = {int(c): i for i, c in enumerate(corr) if c >= 0}
    a_start = api["start_ns"].to_numpy(zero_copy_only=False)
    a_tid = api["tid"].to_numpy(zero_copy_only=False)
    a_corr = api["correlation_id"].to_numpy(zero_copy_only=False)
    order = np.argsort(a_start, kind="stable")
    a_start, a_tid, a_corr = a_start[order], a_tid[order], a_corr[order]
    seen: dict[str, int] = {}
    out = []
    claimed: set[int] = set()
    for start, end, name, tid, size in zip(
        *(ops[c].to_pylist() for c in ("start_ns", "end_ns", "name", "tid", "bytes"))
    ):  # fmt: skip
        lo, hi = np.searchsorted(a_start, start, "left"), np.searchsorted(a_start, end, "right")
        hits = [by_corr[int(c)] for c, th in zip(a_corr[lo:hi], a_tid[lo:hi]) if th == tid and int(c) in by_corr]
        if not hits:
            continue  # a host op whose kernels the trace does not hold (gloo, or cut by the trace's window)
        claimed.update(hits)
        kind = coll.collective_kind(name)
        k = seen[kind] = seen.get(kind, -1) + 1
        spans = [(int(k_start[i]), int(k_end[i])) for i in hits]
        out.append(
            Call(rank, kind, k, min(s for s, _ in spans), max(e for _, e in spans), sum(e - s for s, e in spans), size)
        )
    if len(claimed) == comm.num_rows:
        return out
    # kernels no host op launched (its range cut by the trace's window): calls of their own, of no known size
    rest = comm.filter(pa.array([i not in claimed for i in range(comm.num_rows)]))
    return _renumbered(out + _from_kernels(rank, rest))


def _renumbered(found: list[Call]) -> list[Call]:
    seen: dict[str, int] = {}
    out = []
    for c in sorted(found, key=lambda c: c.start_ns):
        k = seen[c.kind] = seen.get(c.kind, -1) + 1
        out.append(Call(c.rank, c.kind, k, c.start_ns, c.end_ns, c.kernel_ns, c.bytes))
    return out


def _from_kernels(rank: int, comm: pa.Table) -> list[Call]:
    seen: dict[str, int] = {}
    out = []
    rows = sorted(zip(*(comm[c].to_pylist() for c in ("start_ns", "end_ns", "name"))))
    for start, end, name in rows:
        kind = coll.collective_kind(name)
        k = seen[kind] = seen.get(kind, -1) + 1
        out.append(Call(rank, kind, k, int(start), int(end), int(end - start), None))
    return out


def _hidden(c: Call, busy: tuple[np.ndarray, np.ndarray]) -> Call:
    hidden = min(_overlap(busy[0], busy[1], c.start_ns, c.end_ns), c.kernel_ns)
    return Call(c.rank, c.kind, c.index, c.start_ns, c.end_ns, c.kernel_ns, c.bytes, hidden)


def _with_waits(out: list[Call]) -> list[Call]:
    ranks = {c.rank for c in out}
    groups: dict[tuple[str, int], list[Call]] = {}
    for c in out:
        groups.setdefault((c.kind, c.index), []).append(c)
    made = []
    for group in groups.values():
        if len(ranks) < 2 or {c.rank for c in group} != ranks:
            made += group
            continue
        last = max(c.start_ns for c in group)
        for c in group:
            wait = min(max(0, last - c.start_ns), c.kernel_ns)
            made.append(Call(c.rank, c.kind, c.index, c.start_ns, c.end_ns, c.kernel_ns, c.bytes, c.hidden_ns, wait))
    return sorted(made, key=lambda c: (c.rank, c.start_ns))


def table(folder: Run) -> CollectivesTable | None:
    """One row per rank and kind; None where the run has no communication kernels."""
    found = calls(folder)
    if not found:
        return None
    record = folder.read_record() if folder.run_json.exists() else None
    world = max(record.world_size if record is not None else 1, len({c.rank for c in found}))
    rows = []
    for rank, kind in sorted({(c.rank, c.kind) for c in found}):
        mine = [c for c in found if c.rank == rank and c.kind == kind]
        time_ns = sum(c.kernel_ns for c in mine)
        hidden_ns = sum(c.hidden_ns for c in mine)
        size = None if any(c.bytes is None for c in mine) else sum(c.bytes or 0 for c in mine)
        waits = None if any(c.wait_ns is None for c in mine) else sum(c.wait_ns or 0 for c in mine)
        algbw = size / (time_ns / 1e9) / GB if size is not None and time_ns > 0 else None
        factor = coll.BUS_FACTOR.get(kind)
        rows.append(
            CollectiveRow(
                rank=rank,
                kind=kind,
                calls=len(mine),
                bytes=size,
                time_s=time_ns / 1e9,
                wait_s=None if waits is None else waits / 1e9,
                transfer_s=None if waits is None else (time_ns - waits) / 1e9,
                exposed_s=(time_ns - hidden_ns) / 1e9,
                hidden_s=hidden_ns / 1e9,
                algbw_gbps=algbw,
                busbw_gbps=algbw * factor(world) if algbw is not None and factor is not None and world > 1 else None,
            )
        )
    known = any(r.bytes is not None for r in rows)
    return CollectivesTable(tuple(rows), world, BYTES_FROM_TRACE if known else BYTES_NOT_RECORDED)


COLUMNS = (
    ("rank", "rank"),
    ("kind", "kind of collective"),
    ("calls", "calls"),
    ("bytes", "bytes"),
    ("time_s", "time (ms)"),
    ("wait_s", "waiting for the last rank (ms)"),
    ("transfer_s", "transfer (ms)"),
    ("exposed_s", "exposed (ms)"),
    ("hidden_s", "hidden behind compute (ms)"),
    ("algbw_gbps", "algbw (GB/s)"),
    ("busbw_gbps", "busbw (GB/s)"),
)
"""The collectives table's columns with their headings, as `analyze` and `show` print them."""


def cells(row: CollectiveRow) -> list[str]:
    data = row.to_json()
    out = []
    for key, _ in COLUMNS:
        value = data[key]
        if value is None:
            out.append("-")
        elif key.endswith("_s"):
            out.append(f"{float(value) * 1e3:.3g}")  # type: ignore[arg-type]
        elif key.endswith("_gbps"):
            out.append(f"{float(value):.3g}")  # type: ignore[arg-type]
        elif key == "bytes":
            out.append(f"{int(value):,}")  # type: ignore[call-overload]
        else:
            out.append(str(value))
    return out


def markdown_lines(found: CollectivesTable) -> list[str]:
    """The table in Markdown, headed by its basis."""
    heads = [h for _, h in COLUMNS]
    lines = [f"collectives per rank: n = {found.world_size}; bytes: {found.bytes_from}; busbw by NCCL's formulas", ""]
    lines += ["| " + " | ".join(heads) + " |", "| " + " | ".join("---" for _ in heads) + " |"]
    return lines + ["| " + " | ".join(cells(r)) + " |" for r in found.rows]
