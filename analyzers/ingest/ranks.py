"""Several ranks' traces in, one run out: per-rank Kineto files (a list, a folder or a `.tar[.gz]`) and
an nsys export holding several training processes, read as one run with a RANK column on every table.

Where each rank comes from: a Kineto file's `distributedInfo` (rank, world size, backend) and
`deviceProperties` (the GPU, by the device its kernels ran on); an nsys export's processes that ran
kernels, numbered in the order of their GPUs (the export keeps no RANK variable: nsys-ai's fixtures
have their environment redacted, and torchrun gives rank r GPU r by default).

One clock: Kineto's `baseTimeNanoseconds` (Unix ns) where every rank has it; traces whose own times
are already Unix µs (older Kineto, one host) as they are; else each rank is shifted so that the end of
its first NCCL collective meets rank 0's (a collective ends on every rank together), and the run says
so. An nsys export has one session clock for all its processes.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.ingest import readers, trace_steps
from analyzers.ingest.archives import extract, is_archive
from analyzers.trace import collectives
from analyzers.trace import tables as t
from analyzers.trace.clock import UNIX_NS, Clock
from tracer.core import schema
from tracer.core import trace_formats as tf
from tracer.core.errors import UserError
from tracer.core.records import GpuInfo, RankInfo
from tracer.core.runfolder import RunFolder, write_json_atomic

UNIX_FROM_NS, UNIX_TO_NS = 946_684_800 * 10**9, 4_102_444_800 * 10**9
"""Times between 2000 and 2100 as Unix ns: a trace whose raw times fall there carries the Unix clock."""
ALIGN_BASE_TIME = "kineto baseTimeNanoseconds"
ALIGN_UNIX_TIMES = "the traces' own timestamps (Unix time; no baseTimeNanoseconds)"
ALIGN_FIRST_COLLECTIVE = "first collective"
ALIGN_NSYS_SESSION = "nsys session start (one clock for every process)"
ALIGN_ONE_TRACE = "one trace, on its own clock"


def expand(paths: list[Path], scratch: Path) -> list[Path]:
    """The trace files named by `paths`: files as they are, a folder's trace files (not recursive), an
    archive's trace files extracted flat into `scratch` (regular members only: no path leaves it)."""
    from analyzers.ingest.sniff import sniff, trace_files

    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UserError(f"{path}: no such file or folder")
        if path.is_dir():
            inside = trace_files(path)
            if not inside:
                raise UserError(f"{path}: no trace file in this folder ({readers.readable()})")
            found += inside
        elif is_archive(path):
            out = scratch / readers.stem(path.name).replace(".tar", "")
            found += extract(path, out, lambda p: sniff(p).kind in readers.file_kinds())
        else:
            found.append(path)
    names = Counter(p.resolve() for p in found)
    twice = [str(p) for p, n in names.items() if n > 1]
    if twice:
        raise UserError(f"{twice[0]}: named twice; give each rank's trace once")
    return found


@dataclass(frozen=True)
class RankTrace:
    """One rank's trace, read: its tables on its own clock, and what it says of itself."""

    path: Path
    info: RankInfo
    clock: Clock
    tables: dict[str, pa.Table]
    gpus: tuple[GpuInfo, ...] = ()
    batch: int | None = None


def read_kineto_rank(path: Path) -> RankTrace:
    """One rank's Kineto file, with its rank from `distributedInfo` (rank 0 of 1 without it)."""
    from analyzers.ingest import kineto
    from analyzers.ingest.writing import _refuse_negative

    tables, clock, batch, header = kineto.parse_with_header(path)
    _refuse_negative(path, tables)
    given = header.get("distributedInfo")
    info: dict[str, Any] = given if isinstance(given, dict) else {}
    rank = _whole(path, info, schema.RANK, 0)  # Kineto spells it as we do
    world = _whole(path, info, "world_size", 1)
    if not 0 <= rank < max(world, 1):
        raise UserError(f"{path}: distributedInfo says rank {rank} of world size {world}")
    gpus = _gpus(header.get("deviceProperties"))
    device_id = _main_device(tables.get(t.KERNELS))
    names = {g.index: g.name for g in gpus}
    device = names.get(device_id, "") if device_id is not None else ""
    pid = _main_pid(tables)
    rank_info = RankInfo(
        rank=rank,
        local_rank=device_id if device_id is not None else 0,
        world_size=world,
        device=device or (f"cuda:{device_id}" if device_id is not None else ""),
        backend=str(info.get("backend") or ""),
        pid=pid,
    )
    return RankTrace(path, rank_info, clock, tables, gpus, batch)


def read_kineto_ranks(paths: list[Path]) -> list[RankTrace]:
    """Every file as one rank of one job: each names a different rank, all of the same world size."""
    ranks = []
    for path in paths:
        from analyzers.ingest.sniff import sniff

        if sniff(path).kind != tf.KINETO:
            raise UserError(
                f"{path}: only Kineto (PyTorch profiler) traces are read as several ranks; import an nsys "
                "export holding every rank as one file"
            )
        ranks.append(read_kineto_rank(path))
    if len(ranks) > 1 and not all(r.info.world_size > 1 for r in ranks):
        lacking = next(r.path for r in ranks if r.info.world_size <= 1)
        raise UserError(f"{lacking}: no distributedInfo (rank, world size); import it alone or give only ranks' traces")
    seen: dict[int, Path] = {}
    for r in ranks:
        if r.info.rank in seen:
            raise UserError(f"{r.path} and {seen[r.info.rank]} are both rank {r.info.rank}: give one trace per rank")
        seen[r.info.rank] = r.path
    worlds = {r.info.world_size for r in ranks}
    if len(worlds) > 1:
        raise UserError(f"the traces disagree on the world size ({sorted(worlds)}): they are not one job")
    return sorted(ranks, key=lambda r: r.info.rank)


@dataclass(frozen=True)
class Alignment:
    """How the ranks were put on one clock: `how` in words and each rank's shift (added to its times)."""

    how: str
    shifts_ns: dict[int, int] = field(default_factory=dict)
    trusted: bool = True  # False: the clocks were not comparable and the first collective aligned them

    def text(self) -> str:
        if self.trusted:
            return self.how
        return (
            f"{self.how}: the ranks' clocks are not comparable, so each rank's first NCCL collective end meets rank 0's"
        )


def align(ranks: list[RankTrace]) -> Alignment:
    """How the ranks go on one clock; ranks whose spans on it never overlap are refused: they are not
    one job (two jobs' ranks a day apart would read as one run whose straggler is a day late)."""
    if len(ranks) == 1:  # one trace is on its own clock, whatever that is
        return Alignment(ALIGN_ONE_TRACE, {ranks[0].info.rank: 0})
    if all(r.clock.kind == UNIX_NS for r in ranks):
        return _overlapping(ranks, Alignment(ALIGN_BASE_TIME, {r.info.rank: 0 for r in ranks}))
    if all(UNIX_FROM_NS <= (_first_ns(r) or 0) <= UNIX_TO_NS for r in ranks):
        return _overlapping(ranks, Alignment(ALIGN_UNIX_TIMES, {r.info.rank: 0 for r in ranks}))
    ends = {r.info.rank: _first_collective_end(r) for r in ranks}
    if any(e is None for e in ends.values()):
        missing = next(r.path for r in ranks if ends[r.info.rank] is None)
        raise UserError(
            f"{missing}: its clock is not Unix time and it has no NCCL collective to align on; "
            "the ranks cannot be put on one clock"
        )
    ref = ends[ranks[0].info.rank] or 0
    return Alignment(ALIGN_FIRST_COLLECTIVE, {k: ref - (v or 0) for k, v in ends.items()}, trusted=False)


def _overlapping(ranks: list[RankTrace], alignment: Alignment) -> Alignment:
    """`alignment`, when every rank's span on it meets every other's (the ranks of one job run together)."""
    spans = [(r, _span(r, alignment.shifts_ns.get(r.info.rank, 0))) for r in ranks]
    known = [(r, span) for r, span in spans if span is not None]
    if len(known) < 2:
        return alignment
    late = max(known, key=lambda item: item[1][0])
    early = min(known, key=lambda item: item[1][1])
    gap_ns = late[1][0] - early[1][1]
    if gap_ns > 0:
        raise UserError(
            f"{late[0].path} (rank {late[0].info.rank}) starts {gap_ns / 1e9:,.0f} s after {early[0].path} "
            f"(rank {early[0].info.rank}) ends: the traces never overlap in time, so they are not one job's "
            "ranks; import each alone, or give the traces of one job"
        )
    return alignment


def _span(r: RankTrace, shift_ns: int) -> tuple[int, int] | None:
    starts = [pc.min(tab["start_ns"]).as_py() for tab in r.tables.values() if tab.num_rows]
    ends = [pc.max(tab["end_ns"]).as_py() for tab in r.tables.values() if tab.num_rows and "end_ns" in tab.column_names]
    starts, ends = [s for s in starts if s is not None], [e for e in ends if e is not None]
    if not starts or not ends:
        return None
    return min(starts) + shift_ns, max(ends) + shift_ns


def write_ranks(folder: RunFolder, ranks: list[RankTrace], alignment: Alignment) -> list[str]:
    """Every rank's tables as one table each (RANK column, shifted onto one clock); the steps of their own
    ranges are written apart, with every format's (`step_ranges`, `trace_steps.write_steps`)."""
    from analyzers.ingest.writing import write_tables

    several = len(ranks) > 1 or ranks[0].info.world_size > 1  # a lone process's tables stay without ranks
    merged: dict[str, list[pa.Table]] = {}
    for r in ranks:
        shift = alignment.shifts_ns.get(r.info.rank, 0)
        for name, table in r.tables.items():
            table = _shifted(table, shift)
            merged.setdefault(name, []).append(t.with_rank(table, r.info.rank) if several else table)
    # one rank's table is in order already (the reader sorts it, and a shift keeps it): no copy to sort
    tables = {
        name: parts[0] if len(parts) == 1 else pa.concat_tables(parts).sort_by("start_ns")
        for name, parts in merged.items()
    }
    written = write_tables(folder, tables, t.SOURCE_KINETO, ranks[0].clock, facts_of(ranks))
    if not several:
        return written
    record_ranks(
        folder,
        t.SOURCE_KINETO,
        alignment,
        [
            {
                schema.RANK: r.info.rank,
                "file": r.path.name,
                **r.clock.to_json(),
                "shift_ns": alignment.shifts_ns.get(r.info.rank, 0),
            }
            for r in ranks
        ],
    )
    return written


def step_ranges(ranks: list[RankTrace], alignment: Alignment) -> list[trace_steps.Ranges]:
    """Each rank's tables, for the steps of its own ranges (`trace_steps.write_steps`), on the run's clock."""
    return [trace_steps.Ranges(r.tables, r.info.rank, r.batch, alignment.shifts_ns.get(r.info.rank, 0)) for r in ranks]


def facts_of(ranks: list[RankTrace]) -> dict[str, int]:
    """What the ranks' traces say of their run: the batch, where every rank recorded the same one."""
    batches = {r.batch for r in ranks}
    batch = batches.pop() if len(batches) == 1 else None
    return {t.BATCH_FACT: batch} if batch is not None else {}


def record_ranks(folder: RunFolder, source: str, alignment: Alignment, ranks: list[dict[str, Any]]) -> None:
    meta_path = folder.path / t.TRACE_META
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    meta.setdefault(source, {})
    meta[source][t.RANKS_FACT] = ranks
    meta[source][t.ALIGNMENT_FACT] = alignment.text()
    write_json_atomic(meta_path, meta)


NSYS_RANKS = Alignment(ALIGN_NSYS_SESSION)
"""The processes of one nsys session share its clock: nothing is shifted."""


def split_nsys(folder: RunFolder, written: list[str]) -> tuple[list[RankInfo], dict[int, int]]:
    """An nsys import with several processes that ran kernels: each such process a rank (in the order of
    its lowest GPU), the RANK column added to every table (null on rows of other processes: the
    launcher, a shell); nothing changes for one process. Returns the ranks and pid -> rank."""
    if t.KERNELS not in written:
        return [], {}
    kernels = pq.read_table(folder.table_path(t.KERNELS), columns=["pid", "device", "name"])
    by_pid: dict[int, set[int]] = {}
    for pid, device in zip(kernels["pid"].to_pylist(), kernels["device"].to_pylist()):
        by_pid.setdefault(pid, set()).add(device)
    if len(by_pid) < 2:
        return [], {}
    order = sorted(by_pid, key=lambda p: (min(by_pid[p]), p))
    rank_of_pid = {pid: i for i, pid in enumerate(order)}
    rank_of_device = {min(by_pid[pid]): i for i, pid in enumerate(order)}
    nccl = bool(pc.any(collectives.nccl_mask(kernels["name"])).as_py())
    for name in written:
        path = folder.table_path(name)
        table = pq.read_table(path)
        if "pid" in table.column_names:
            ranks = _mapped(table["pid"], rank_of_pid)
        elif "device" in table.column_names:
            ranks = _mapped(table["device"], rank_of_device)
        else:
            continue
        tmp = path.with_suffix(".parquet.tmp")
        pq.write_table(t.with_rank(table, ranks), tmp)
        tmp.replace(path)
    infos = [
        RankInfo(
            rank=i,
            local_rank=min(by_pid[pid]),
            world_size=len(order),
            device=f"cuda:{min(by_pid[pid])}",
            backend="nccl" if nccl else "",
            pid=pid,
        )
        for i, pid in enumerate(order)
    ]
    record_ranks(
        folder,
        t.SOURCE_NSYS,
        NSYS_RANKS,
        [{schema.RANK: i, "pid": pid, "device": min(by_pid[pid])} for i, pid in enumerate(order)],
    )
    return infos, rank_of_pid


def _mapped(values: pa.ChunkedArray, mapping: dict[int, int]) -> pa.Array:
    keys = pa.array(list(mapping), pa.int64())
    index = pc.index_in(values.combine_chunks().cast(pa.int64()), value_set=keys)
    return pc.take(pa.array(list(mapping.values()), pa.int64()), index)


def _shifted(table: pa.Table, shift_ns: int) -> pa.Table:
    if not shift_ns:
        return table
    for column in ("start_ns", "end_ns"):
        if column in table.column_names:
            i = table.schema.get_field_index(column)
            table = table.set_column(i, table.schema.field(i), pc.add_checked(table[column], shift_ns))
    return table


def _first_ns(r: RankTrace) -> int | None:
    firsts = [pc.min(tab["start_ns"]).as_py() for tab in r.tables.values() if tab.num_rows]
    firsts = [f for f in firsts if f is not None]
    return min(firsts) if firsts else None


def _first_collective_end(r: RankTrace) -> int | None:
    kernels = r.tables.get(t.KERNELS)
    if kernels is None or not kernels.num_rows:
        return None
    nccl = kernels.filter(collectives.nccl_mask(kernels["name"]))
    return pc.min(nccl["end_ns"]).as_py() if nccl.num_rows else None


def _gpus(props: Any) -> tuple[GpuInfo, ...]:
    if not isinstance(props, list):
        return ()
    out: list[GpuInfo] = []
    for p in props:
        if isinstance(p, dict) and isinstance(p.get("name"), str):
            total = p.get("totalGlobalMem")
            mib = float(total) / 2**20 if isinstance(total, (int, float)) else 0.0
            out.append(GpuInfo(_int(p.get("id"), len(out)), p["name"], mib))
    return tuple(out)


def _main_device(kernels: pa.Table | None) -> int | None:
    if kernels is None or not kernels.num_rows:
        return None
    return int(_most_common(kernels["device"]))


def _most_common(values: pa.ChunkedArray) -> Any:
    """`Counter(values).most_common(1)`'s value (the first seen of equally common ones), counted by Arrow:
    the column never becomes a Python list."""
    counts = pc.value_counts(values)  # in the order each value is first seen
    numbers = counts.field("counts").to_pylist()
    return counts.field("values")[max(range(len(numbers)), key=numbers.__getitem__)].as_py()


def _main_pid(tables: dict[str, pa.Table]) -> int | None:
    for name in (t.OPERATORS, t.CUDA_API, t.NVTX):
        table = tables.get(name)
        if table is not None and table.num_rows and "pid" in table.column_names:
            return int(_most_common(table["pid"]))
    return None


MAX_WORLD = 1 << 24
"""Ranks of one job: far beyond any machine's (the largest runs have ~10^5 GPUs); a bigger count is damage."""


def _whole(path: Path, info: dict[str, Any], key: str, default: int) -> int:
    """`distributedInfo[key]` as a count from 0 to MAX_WORLD (`default` when absent); anything else (a list,
    text, a fraction, a 301-digit number) is refused in one line, never read as `default`."""
    value = info.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_WORLD:
        raise UserError(f"{path}: distributedInfo's {key} is {str(value)[:40]!s}, not a whole number of ranks")
    return value


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
