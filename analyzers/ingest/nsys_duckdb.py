"""Every normalised table of an nsys export (CUDA API calls, kernels, memory operations, NVTX, OS
runtime) copied to Parquet inside DuckDB, from SQLite (`write_sqlite`) or Arrow (`nsys_arrow`).

Why: reading SQLite is the cost of an import, and DuckDB's sqlite scanner (the `duckdb-extension-sqlite-
scanner` wheel, loaded from its file: nothing is downloaded) reads it about twice as cheaply per value as
ADBC, splits each table into rowid ranges over every core, and writes Parquet in parallel, with no Arrow
round trip through Python. Each table is written sorted by start (DuckDB sorts on every core, spilling
under MEMORY_LIMIT): nsys 2025.6 and later no longer export rows in time order, and the file's order
was never a promise. Labels (API names, thread names, copy kinds) come from the small
Python maps `analyzers.ingest.nsys_export` builds, joined in SQL, so each naming rule stays declared
once. The extension is a pinned dependency (`pyproject.toml`): without it nothing is read, and the error
says which package to install.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from analyzers.ingest import nsys_export as ex
from analyzers.ingest import nsys_nccl
from analyzers.ingest.duckdb_sqlite import attach_sqlite, connect, quoted, sqlite_scanner
from analyzers.trace import collectives as coll
from analyzers.trace import tables as t
from analyzers.trace.clock import Clock
from tracer.core.errors import UserError

STRINGS, THREADS = "strings", "threads"
"""The two label tables a Copier makes from the export's maps."""
LITERAL_LABELS = 5_000
"""Label maps up to this size go to DuckDB as SQL literals (under 0.1 s), bigger ones as parameters."""


def _quoted_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _literal_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


class Copier:
    """One DuckDB connection with the export as schema `nsys`; each `copy_*` writes one
    normalised table (columns in the declared schema's order and types) and returns its row count,
    leaving no file when there were no rows."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, offset_ns: int, strings: dict[int, str], threads: dict[int, str]
    ) -> None:
        """`con` from `connect`, with the export as schema `nsys`. `strings` (StringIds) and `threads`
        (globalTid -> name) become label tables when first used."""
        self.con = con
        self.offset = int(offset_ns)
        self.maps = {STRINGS: strings, THREADS: threads}
        self.made: set[str] = set()
        self.constants: dict[str, str] = {}  # value -> its ENUM literal (`_constant`)

    def close(self) -> None:
        self.con.close()

    def _copy(self, select: str, out: Path, schema: pa.Schema) -> int:
        """String columns pass through as they come (ENUMs stay ENUMs: DuckDB writes their dictionary
        straight into Parquet, about a third of the copy's cost saved against VARCHAR). A row without a
        start or an end (a NULL in a damaged or unfinished export) cannot be placed in time: left out."""
        cols = ", ".join(
            f.name if f.type == pa.string() else f"CAST({f.name} AS {_SQL_TYPES[str(f.type)]}) AS {f.name}"
            for f in schema
        )
        timed = " WHERE start_ns IS NOT NULL AND end_ns IS NOT NULL" if "end_ns" in schema.names else ""
        order = " ORDER BY start_ns" if "start_ns" in schema.names else ""  # nsys 2025.6+ exports rows unordered
        done = self.con.execute(
            f"COPY (SELECT {cols} FROM ({select}){timed}{order}) TO '{quoted(out)}' (FORMAT parquet)"
        )
        rows = int((done.fetchone() or (0,))[0])
        if not rows:
            out.unlink(missing_ok=True)
        return rows

    def _labels(self, table: str, labels: dict[int, str], shown: Callable[[str], str] | None = None) -> None:
        """`table(id, label[, shown])` with ENUM-typed labels, '' among the values (the fallback for an
        id that has no label). A small map goes in as SQL literals, a big one as query parameters: DuckDB
        imports pandas to look at parameters (a fifth of a second), and literals cost about 16 us each."""
        ids = list(labels)
        columns = {"label": [labels[i] for i in ids]}
        if shown is not None:
            columns["shown"] = [shown(v) for v in columns["label"]]
        small = len(ids) <= LITERAL_LABELS and not any("\x00" in v for v in columns["label"])  # SQL ends at NUL
        lists = [_literal_list([str(i) for i in ids]) if small else "$1"]
        lists += [
            _literal_list([_quoted_text(v) for v in vs]) if small else f"${n + 2}"
            for n, vs in enumerate(columns.values())
        ]
        params = None if small else [ids, *columns.values()]
        self.con.execute(
            f"CREATE TEMP TABLE {table}_text AS SELECT unnest({lists[0]}::BIGINT[]) AS id, "
            + ", ".join(f"unnest({lst}::VARCHAR[]) AS {col}" for lst, col in zip(lists[1:], columns)),
            params,
        )
        for col in columns:
            self.con.execute(
                f"CREATE TYPE {table}_{col} AS ENUM "
                f"(SELECT DISTINCT v FROM (SELECT {col} AS v FROM {table}_text UNION ALL SELECT '') ORDER BY v)"
            )
        typed = ", ".join(f"{col}::{table}_{col} AS {col}" for col in columns)
        self.con.execute(f"CREATE TEMP TABLE {table} AS SELECT id, {typed} FROM {table}_text")

    def _table(self, name: str) -> str:
        """The label table `name` (STRINGS has `label` and nsys's API display name `shown`; THREADS has
        `label`), made on first use."""
        if name not in self.made:
            self._labels(name, self.maps[name], t.api_display_name if name == STRINGS else None)
            self.made.add(name)
        return name

    def _constant(self, value: str) -> str:
        """`value` as a one-value ENUM literal (a VARCHAR constant would be written row by row); one type
        per value, made on first use."""
        if value not in self.constants:
            name = f"constant_{len(self.constants)}"
            self.con.execute(f"CREATE TYPE {name} AS ENUM ({_quoted_text(value)})")
            self.constants[value] = f"{_quoted_text(value)}::{name}"
        return self.constants[value]

    def _times(self, a: str) -> str:
        """start_ns, end_ns and dur_ns of alias `a` (a table without dur_ns leaves it out in `_copy`)."""
        off = self.offset
        return f'{a}.start + {off} AS start_ns, {a}."end" + {off} AS end_ns, {a}."end" - {a}.start AS dur_ns'

    def copy_cuda_api(self, out: Path, excluded: list[int]) -> int:
        """The runtime/driver calls that count (backtrace duplicates left out), named as nsys's reports
        do. A name id missing from StringIds (a damaged export) is named `<nameId N>`: the file is then
        written again with text labels, the slow way, only for such files."""
        strings, threads = self._table(STRINGS), self._table(THREADS)
        kinds = f"CREATE TYPE call_kind AS ENUM ('{t.API_RUNTIME}', '{t.API_DRIVER}')"
        self.con.execute(kinds)
        source = self._constant(t.SOURCE_NSYS)

        def select(name: str, api: str) -> str:
            return (
                f"SELECT {self._times('r')}, {name} AS name, {api} AS api, "
                f"(CASE WHEN r.eventClass = {ex.DRIVER_EVENT_CLASS} THEN '{t.API_DRIVER}' ELSE '{t.API_RUNTIME}' END)"
                "::call_kind AS kind, "
                f"{ex.pid_sql('r.globalTid')} AS pid, {ex.tid_sql('r.globalTid')} AS tid, "
                f"coalesce(th.label, ''::{threads}_label) AS thread_name, "
                f"coalesce(r.correlationId, -1) AS correlation_id, {source} AS source "
                f"FROM nsys.{ex.RUNTIME} r "
                f"LEFT JOIN {strings} n ON n.id = r.nameId "
                f"LEFT JOIN {threads} th ON th.id = coalesce(r.globalTid, 0) "
                f"WHERE r.eventClass NOT IN ({', '.join(map(str, excluded))})"
            )

        rows = self._copy(select("n.label", "n.shown"), out, t.CUDA_API_SCHEMA)
        if rows and _nulls(out, "name"):
            missing = "'<nameId ' || r.nameId || '>'"
            rows = self._copy(
                select(f"coalesce(n.label::VARCHAR, {missing})", f"coalesce(n.shown::VARCHAR, {missing})"),
                out,
                t.CUDA_API_SCHEMA,
            )
        return rows

    def copy_kernels(self, out: Path) -> int:
        strings = self._table(STRINGS)
        select = (
            f"SELECT {self._times('k')}, coalesce(d.label, ''::{strings}_label) AS name, "
            f"coalesce(s.label, ''::{strings}_label) AS short_name, "
            "k.deviceId AS device, k.streamId AS stream, coalesce(k.correlationId, -1) AS correlation_id, "
            f"{ex.pid_sql('k.globalPid')} AS pid, k.gridX AS grid_x, k.gridY AS grid_y, k.gridZ AS grid_z, "
            f"k.blockX AS block_x, k.blockY AS block_y, k.blockZ AS block_z, {self._constant(t.SOURCE_NSYS)} AS source "
            f"FROM nsys.{ex.KERNEL} k "
            f"LEFT JOIN {strings} d ON d.id = k.demangledName LEFT JOIN {strings} s ON s.id = k.shortName"
        )
        return self._copy(select, out, t.KERNELS_SCHEMA)

    def copy_memory_ops(self, out: Path, copy_kinds: dict[int, str] | None, memsets: bool) -> int:
        """Copies (kind named by `copy_kinds`, id -> nsys label) and memsets, as one table."""
        parts = []
        common = (
            "m.bytes AS bytes, m.deviceId AS device, m.streamId AS stream, "
            "coalesce(m.correlationId, -1) AS correlation_id, "
            f"{self._constant(t.SOURCE_NSYS)} AS source"
        )
        if copy_kinds is not None:
            self._labels("copy_kinds", copy_kinds)
            parts.append(
                f"SELECT {self._times('m')}, coalesce(c.label::VARCHAR, {_memcpy_unknown()}) AS kind, {common} "
                f"FROM nsys.{ex.MEMCPY} m LEFT JOIN copy_kinds c ON c.id = m.copyKind"
            )
        if memsets:
            kind = t.MEMSET_KIND.replace("'", "''")
            parts.append(f"SELECT {self._times('m')}, '{kind}' AS kind, {common} FROM nsys.{ex.MEMSET} m")
        if not parts:
            return 0
        return self._copy(" UNION ALL ".join(parts), out, t.MEMCPY_SCHEMA)

    def copy_nvtx(self, out: Path, has_text_id: bool) -> int:
        """Ranges only (rows with an end; marks carry no duration), by start. `textId` is the newer
        exports' registered-string column."""
        return self._copy(
            _nvtx_select(self._times("n"), has_text_id, self._constant(t.SOURCE_NSYS)), out, t.NVTX_SCHEMA
        )

    def copy_osrt(self, out: Path) -> int:
        """OS runtime calls (the CPU side of a thread's time in nsys), by start."""
        strings, threads = self._table(STRINGS), self._table(THREADS)
        select = (
            f"SELECT {self._times('o')}, coalesce(n.label, ''::{strings}_label) AS name, "
            f"{ex.pid_sql('o.globalTid')} AS pid, {ex.tid_sql('o.globalTid')} AS tid, "
            f"coalesce(th.label, ''::{threads}_label) AS thread_name, {self._constant(t.SOURCE_NSYS)} AS source "
            f"FROM nsys.{ex.OSRT} o LEFT JOIN {strings} n ON n.id = o.nameId "
            f"LEFT JOIN {threads} th ON th.id = coalesce(o.globalTid, 0) ORDER BY o.start"
        )
        return self._copy(select, out, t.OSRT_SCHEMA)


def _nvtx_select(times: str, has_text_id: bool, source: str) -> str:
    name = "coalesce(n.text, s.value, '')" if has_text_id else "coalesce(n.text, '')"
    join = "LEFT JOIN nsys.StringIds s ON s.id = n.textId" if has_text_id else ""
    return (
        f"SELECT {times}, {name} AS name, {ex.pid_sql('n.globalTid')} AS pid, {ex.tid_sql('n.globalTid')} AS tid, "
        f'{source} AS source FROM nsys.{ex.NVTX} n {join} WHERE n."end" IS NOT NULL ORDER BY n.start'
    )


def _nulls(path: Path, column: str) -> int:
    """Null count of `column` from the Parquet footer (no data read); a row group without the count
    counts as having nulls."""
    stats = t.row_group_statistics(pq.ParquetFile(path), column)
    return sum(s.null_count if s is not None and s.has_null_count else 1 for s in stats)


def _memcpy_unknown() -> str:
    """A copy kind missing from the labels is named by its number, as `tables.memcpy_kind_label` names it."""
    prefix, suffix = t.memcpy_kind_label("\x00").split("\x00")
    return f"'{prefix}' || m.copyKind || '{suffix}'"


_SQL_TYPES = {"int64": "BIGINT", "string": "VARCHAR"}  # by the Arrow type's name


def write_sqlite(path: Path, out_dir: Path) -> tuple[list[str], Clock]:
    """Every normalised table a SQLite export has, written as `out_dir/<table>.parquet` (empty ones left
    out), and the clock used. No table sits whole in memory: DuckDB's sqlite scanner copies them on
    every core (the big tables' rows in no particular order)."""
    extension = sqlite_scanner()
    if extension is None:
        raise UserError(
            f"{path}: reading nsys SQLite needs DuckDB's sqlite scanner: "
            f"pip install duckdb-extension-sqlite-scanner=={duckdb.__version__}"
        )
    with ex.open_readonly(path) as db:
        names = ex.check_nsys(path, db)
        clock = ex.session_clock(db, names)
        con = connect(out_dir)
        try:
            attach_sqlite(con, db.path, extension)
        except duckdb.Error as e:
            con.close()
            raise UserError(f"{path}: damaged or truncated SQLite file ({_first_line(e)})") from None
        return copied_by_duckdb(con, db, names, clock, out_dir), clock


def copied_by_duckdb(
    con: duckdb.DuckDBPyConnection, db: ex.Export, names: set[str], clock: Clock, out_dir: Path
) -> list[str]:
    """Every table written by a `Copier` from the export seen as schema `nsys` on `con` (closed on
    return); `db` answers the small questions (labels, event classes) about the same export."""
    copier = Copier(con, clock.offset_ns, ex.strings(db), ex.thread_names(db, names))
    rows: dict[str, int] = {}
    try:
        if ex.RUNTIME in names:
            rows[t.CUDA_API] = copier.copy_cuda_api(
                out_dir / f"{t.CUDA_API}.parquet", ex.excluded_event_classes(db, names)
            )
        if ex.KERNEL in names:
            rows[t.KERNELS] = copier.copy_kernels(out_dir / f"{t.KERNELS}.parquet")
        kinds = ex.memcpy_kinds(db, names) if ex.MEMCPY in names else None
        rows[t.MEMCPY] = copier.copy_memory_ops(out_dir / f"{t.MEMCPY}.parquet", kinds, ex.MEMSET in names)
        if ex.NVTX in names:
            rows[t.NVTX] = copier.copy_nvtx(out_dir / f"{t.NVTX}.parquet", "textId" in db.columns(ex.NVTX))
        if ex.OSRT in names:
            rows[t.OSRT] = copier.copy_osrt(out_dir / f"{t.OSRT}.parquet")
        rows[coll.COMM_OPS] = nsys_nccl.write(db, names, clock.offset_ns, out_dir / f"{coll.COMM_OPS}.parquet")
    except duckdb.Error as e:
        raise UserError(f"{db.path}: damaged or truncated export ({_first_line(e)})") from None
    except UnicodeDecodeError as e:  # a StringIds value that is not UTF-8 (a BLOB): DuckDB's text of it
        raise UserError(f"{db.path}: damaged export: a string is not UTF-8 ({_first_line(e)})") from None
    finally:
        copier.close()
    return [name for name in (t.CUDA_API, t.KERNELS, t.MEMCPY, t.NVTX, t.OSRT, coll.COMM_OPS) if rows.get(name)]


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
