"""What the readers of Chrome-trace JSON share (Kineto's, `analyzers.ingest.kineto`; XProf's,
`analyzers.ingest.xprof`): the file opened plain or gzipped, times in µs made exact ns, and `Columns`,
the compact column store their rows are kept in. Public, so that neither reader imports the other's
private names."""

from __future__ import annotations

import gzip
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc

from analyzers.ingest.trace_events import bounded_name
from analyzers.trace import tables as t
from tracer.core import arrow_build as build

SEQUENCE = "sequence"
"""A column kept only to order rows: an operator's `External id` (Kineto numbers ops as it creates them, so
of two ops with the same start and end, the enclosing one has the smaller number)."""
MAX_NS = 2**63 - 1  # the tables' int64
THOUSAND = Decimal(1000)


def open_trace(path: Path) -> IO[bytes]:
    with path.open("rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def ns(value: Decimal | None) -> int:
    """µs to integer ns, exact for the exporter's 3 decimals (more are rounded half to even); a time
    that is missing, negative or does not fit the tables' int64 is refused (ValueError)."""
    if value is None:
        raise ValueError("a complete event has no ts")
    out = int((value * THOUSAND).to_integral_value())
    if not 0 <= out <= MAX_NS:
        raise ValueError(f"time {value} µs is out of range")
    return out


def as_int(value: Any, default: int = -1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class Columns:
    """Kept rows of one table: Python tuples for the last few thousand rows, Arrow arrays before them,
    so a long trace never sits in memory as Python objects (peak memory is the goal here). Strings are
    kept as int32 codes into one dictionary per column (a trace repeats a few thousand names), and
    `table` hands them over so, dictionary-encoded. Arrays are built from raw buffers (`tracer.core.arrow_build`): no
    pandas probe."""

    BATCH_ROWS = 8192

    def __init__(
        self, names: list[str], schema: pa.Schema, aliases: dict[str, str] | None = None, source: str = t.SOURCE_KINETO
    ) -> None:
        self.schema = schema
        self.source = source
        self.names = names
        self.aliases = aliases or {}
        """Columns of the table that equal another (name: the column it repeats)."""
        self.types = [schema.field(n).type if n in schema.names else pa.int64() for n in names]
        self.codes: dict[int, dict[str, int]] = {i: {} for i, typ in enumerate(self.types) if typ == pa.string()}
        self.rows: list[tuple[Any, ...]] = []
        self.parts: list[list[pa.Array]] = []

    def add(self, *values: Any) -> None:
        """One row, values in the order of `names`."""
        self.rows.append(values)
        if len(self.rows) >= self.BATCH_ROWS:
            self._flush()

    def add_arrays(self, arrays: list[pa.Array]) -> None:
        """Rows as whole columns, in the order of `names` (int64 arrays, strings as string arrays), after
        the rows `add` has been given so far."""
        self._flush()
        out = []
        for i, values in enumerate(arrays):
            codes = self.codes.get(i)
            if codes is None:
                out.append(values)
                continue
            encoded = values.dictionary_encode()
            mapping = [codes.setdefault(_bounded(v), len(codes)) for v in encoded.dictionary.to_pylist()]
            out.append(pc.take(build.ints(mapping, pa.int32()), encoded.indices))
        self.parts.append(out)

    def _flush(self) -> None:
        if not self.rows:
            return
        arrays = []
        for i, col in enumerate(zip(*self.rows)):
            codes = self.codes.get(i)
            if codes is None:
                arrays.append(build.ints(col, self.types[i]))
            else:
                arrays.append(build.ints([codes.setdefault(_bounded(v), len(codes)) for v in col], pa.int32()))
        self.parts.append(arrays)
        self.rows = []

    def table(self, offset_ns: int) -> pa.Table:
        self._flush()
        schema = self.schema
        if not self.parts:
            return t.empty(schema)
        words = {i: build.strings(list(codes)) for i, codes in self.codes.items()}
        raw = pa.Table.from_batches([pa.RecordBatch.from_arrays(part, names=self.names) for part in self.parts])
        self.parts = []
        # by start, the longer first at one start (a parent before the child it opens with), whatever order
        # the trace had them in; Table.sort_by probes for pandas
        length = "dur_ns" if "dur_ns" in self.names else "end_ns"
        keys = [("start_ns", "ascending"), (length, "descending")]
        keys += [(SEQUENCE, "ascending")] if SEQUENCE in self.names else []  # equal spans: the one made first
        raw = raw.take(pc.sort_indices(raw, sort_keys=keys))
        # Strings stay codes into their dictionary (`tables.dictionary_strings`): each distinct one is stored
        # once (a trace's 74 k kernel rows repeat a few hundred names of up to 400 characters: 30 MiB of
        # plain strings), and the Parquet writer takes them without hashing every row again.
        cols: dict[str, Any] = {
            k: _dictionary(raw[k], words[i]) if i in words else raw[k] for i, k in enumerate(self.names)
        }
        n = raw.num_rows
        offset = build.int_scalar(offset_ns)
        # checked: a time past int64 is refused (ArrowInvalid), never wrapped to a negative one
        start = cols["start_ns"] = pc.add_checked(raw["start_ns"], offset)
        if "dur_ns" in schema.names:
            cols["end_ns"] = pc.add_checked(start, raw["dur_ns"])
        else:
            cols["end_ns"] = pc.add_checked(raw["end_ns"], offset)
        cols["source"] = build.repeated(self.source, n)
        for alias, column in self.aliases.items():
            cols[alias] = cols[column]  # the same buffers, not a copy
        arrays = [cols[k] if k in cols else pa.nulls(n, schema.field(k).type) for k in schema.names]
        fields = [f.with_type(a.type) if pa.types.is_dictionary(a.type) else f for f, a in zip(schema, arrays)]
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _bounded(value: Any) -> Any:
    """A string cut to the longest name a table keeps (`trace_events.bounded_name`); other values as they are."""
    return bounded_name(value) if type(value) is str else value


def _dictionary(codes: pa.ChunkedArray, words: pa.Array) -> pa.ChunkedArray:
    """`codes` (int32 indices into `words`) as a dictionary-encoded string column, sharing their buffers."""
    return pa.chunked_array(
        [pa.DictionaryArray.from_arrays(chunk, words) for chunk in codes.chunks],
        pa.dictionary(pa.int32(), pa.string()),
    )


def first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:200]
