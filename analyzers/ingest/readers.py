"""Every trace format the ingest reads, registered once: its kind (named in `tracer.core.trace_formats` where
other code tells it apart), its words for the help texts, whose rows it gives (the tables' `source`), the
framework it can only come from, how its names end, how its content is told apart (`sniff`) and its reader.
The sniffing (`analyzers.ingest.sniff`), the ingest (`analyzers.ingest.pipeline`), the import
(`analyzers.ingest.import_run`) and every list of trace suffixes look a format up here instead of each keeping a
chain of `if kind ==`; a new format is its reader module and one line in READERS (its kind, words,
suffixes, `sniff`, and the module's name: docs/development/architecture.md, "A trace format").

A reader takes a path and returns a `Read`: the normalised tables, the clock they are on and what the trace
says of the run (`facts`: Kineto's batch, read from the recorded shapes). nsys is the exception: its
export is streamed into the run folder table by table (memory flat in the rows), so its entry has no
`read` and the pipeline streams it (`pipeline.ingest_nsys`).

A format's `sniff(look)` is asked what the sniffing has seen of a file or folder (`Look`: its first bytes, or
an SQLite file's table names, a JSON text, a zip's members, a folder) and answers the format in words when the
content is its, else None; the formats are asked in the order of READERS, so a format that a more general one
would also claim comes first (XProf's JSON before any Chrome-trace JSON). This module imports no Arrow: the
sniffing and `tracer analyze FILE` of an nsys export go through it; each reader is imported when it reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from analyzers.trace import table_names as t
from analyzers.trace.clock import Clock
from tracer.core import trace_formats as tf

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Read:
    """One trace, read: its tables, their clock, and the facts it records of the run."""

    tables: dict[str, pa.Table]
    clock: Clock
    facts: dict[str, int] = field(default_factory=dict)


FOLDER, HEAD, SQLITE, JSON, ZIP, BYTES = "folder", "head", "sqlite", "json", "zip", "bytes"
"""What a `Look` is of (`analyzers.ingest.sniff` makes them): a folder; a file's first bytes as they are, before
any container is recognised; an SQLite database's table names; JSON text (a gzip member decompressed); a zip
archive's member names; the first bytes of a file no container was recognised in."""


@dataclass(frozen=True)
class Look:
    """What the sniffing has seen of a file or folder, for each format's `sniff` to claim or not."""

    path: Path
    of: str  # FOLDER, HEAD, SQLITE, JSON, ZIP or BYTES
    head: bytes = b""  # HEAD, BYTES: the file's first bytes; JSON: the text's (decompressed)
    tables: frozenset[str] = frozenset()  # SQLITE: its tables and views
    members: tuple[str, ...] = ()  # ZIP: the names of its members

    def named(self, suffixes: tuple[str, ...]) -> bool:
        return self.path.name.lower().endswith(suffixes)


@dataclass(frozen=True)
class Reader:
    """A format's one registration: everything the sniffing, the ingest, the import and the help texts know
    of it. `read` is a function, or the name of the module whose `read(path) -> Read` reads it (imported only
    when a trace of the format is read: the registry imports no reader, so sniffing stays free of Arrow)."""

    kind: str  # what a run's record says it was imported from
    words: str  # the format in words for help texts and refusals (`readable()`); '' where a sibling's says it
    suffixes: tuple[str, ...]  # how its names end (what a file is, is read from its content: `sniff`)
    sniff: Callable[[Look], str | None]  # the format in words, where the content seen is this format's
    read: Callable[[Path], Read] | str | None  # None: streamed into the folder (nsys)
    source: str = ""  # the tables' `source`; '' is its kind (a Chrome-trace JSON's reader may say paddle or mxnet)
    framework: str | None = None  # the framework the format can only come from; None: any (nsys, rocprof, XPlane)
    one_file: bool = True  # a trace one file (or folder) can be imported or analysed as; False: ours, in raw/

    def __post_init__(self) -> None:
        if not self.source:
            object.__setattr__(self, "source", self.kind)

    def read_trace(self, path: Path) -> Read:
        """The trace read by this format's reader; a table without its schema's `source` column gets the
        format's source on every row (a reader need not name itself)."""
        if self.read is None:
            raise ValueError(f"{self.kind} is streamed into the folder, not read")
        read = self.read(path) if callable(self.read) else import_module(self.read).read(path)
        return replace(read, tables={name: _stamped(table, self.source) for name, table in read.tables.items()})


def _stamped(table: pa.Table, source: str) -> pa.Table:
    if "source" in table.column_names:
        return table
    import pyarrow as pa

    return table.append_column("source", pa.array([source] * table.num_rows, pa.string()))


# What a format's `sniff` is most often: a content test, made here so that a registration stays one line.


def sqlite_with(tables: frozenset[str], what: str, every: bool = True) -> Callable[[Look], str | None]:
    """An SQLite file holding all of `tables` (`every`) or any of them."""

    def sniff(look: Look) -> str | None:
        held = tables <= look.tables if every else bool(tables & look.tables)
        return what if look.of == SQLITE and held else None

    return sniff


def starting_with(magic: bytes, what: str) -> Callable[[Look], str | None]:
    """A file whose first bytes are `magic`, before any container (gzip, zip, SQLite) is recognised."""
    return lambda look: what if look.of == HEAD and look.head.startswith(magic) else None


# nsys: SQLite and Arrow exports, and the report they are exported from (streamed: no `read`)

NSYS_TABLES = frozenset({"StringIds", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "TARGET_INFO_GPU"})
"""Any of these makes an SQLite file an nsys export."""
ARROW_STREAM_MAGIC = b"\xff\xff\xff\xff"
"""An Arrow IPC stream's first message starts with this continuation marker."""
NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report"
NSYS_REP_SUFFIXES = (".nsys-rep", ".qdrep")


def _sniff_nsys_rep(look: Look) -> str | None:
    if look.of == BYTES and (look.head.startswith(NSYS_REP_MAGIC) or look.named(NSYS_REP_SUFFIXES)):
        return "an nsys report"
    return None


# Kineto: the PyTorch profiler's Chrome-trace JSON (or paddle's, or MXNet's: by its rows)


KINETO_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
KINETO_WORDS = "Kineto .json[.gz] (one or several ranks: a folder or a .tar[.gz] of them)"


def _sniff_kineto(look: Look) -> str | None:
    return "a Chrome-trace JSON file" if look.of == JSON else None


def _kineto(path: Path) -> Read:
    from analyzers.ingest import kineto

    tables, clock, batch = kineto.parse(path)
    return Read(tables, clock, {t.BATCH_FACT: batch} if batch is not None else {})


# our in-process CUPTI batches, a raw/cupti/ folder


def _sniff_cupti(look: Look) -> str | None:
    return "our CUPTI records" if look.of == FOLDER and look.path.name == "cupti" else None


def _cupti(path: Path) -> Read:
    from analyzers.ingest import cupti

    return Read(*cupti.read_dir(path))


# XPlane (jax.profiler's, TensorFlow's), and the Chrome-trace JSON XProf makes of it

XPLANE_SUFFIXES = (".xplane.pb",)
XPROF_JSON_SUFFIXES = ("perfetto_trace.json.gz", ".trace.json.gz")
XPROF_HOST_MARK = b'"/host:'
XPROF_DEVICE_MARK = b'"/device:'
"""Process names of a trace XProf converted from XPlane (jax.profiler's perfetto_trace.json.gz)."""


def _sniff_xplane(look: Look) -> str | None:
    # by its name (a protobuf says nothing of itself); 0 bytes: a profiler that died before writing
    return "an XPlane profile" if look.of == HEAD and look.named(XPLANE_SUFFIXES) and look.head else None


def _xplane(path: Path) -> Read:
    from analyzers.ingest import xprof

    return Read(*xprof.read_xplane(path))


def _sniff_xprof_json(look: Look) -> str | None:
    if look.of == JSON and (XPROF_HOST_MARK in look.head or XPROF_DEVICE_MARK in look.head):
        return "a trace XProf wrote (jax.profiler's Perfetto JSON)"
    return None


def _xprof_json(path: Path) -> Read:
    from analyzers.ingest import xprof

    return Read(*xprof.read_json(path))


# rocpd: rocprof's / rocmProfileData's SQLite database

ROCPD_TABLES = frozenset({"rocpd_op", "rocpd_api", "rocpd_string"})
"""All of these make an SQLite file a rocpd (rocprof / rocmProfileData) database."""


# nsys-jax: a zip (or its unpacked folder) of the nvtx_gpu_proj_trace recipe's output

NSYS_JAX_TRACE = "nvtx_gpu_proj_trace/trace.parquet"
"""The nsys-jax archive's recipe output (NVTX ranges projected onto the GPU)."""


def _sniff_nsys_jax(look: Look) -> str | None:
    if look.of == ZIP and any(n.endswith(NSYS_JAX_TRACE) for n in look.members):
        return "an nsys-jax archive"
    if look.of == FOLDER and (look.path / NSYS_JAX_TRACE).is_file():
        return "an unpacked nsys-jax archive"
    return None


READERS = {
    r.kind: r
    for r in (
        Reader(
            tf.XPLANE,
            "XPlane .xplane.pb (or its profile folder)",
            XPLANE_SUFFIXES,
            _sniff_xplane,
            _xplane,
            t.SOURCE_XPROF,
        ),
        Reader(
            tf.NSYS_SQLITE,
            "nsys .sqlite/.arrow/.nsys-rep",
            (".sqlite", ".sqlite3", ".db"),
            sqlite_with(NSYS_TABLES, "an nsys SQLite export", every=False),
            None,
            t.SOURCE_NSYS,
        ),
        Reader(
            tf.NSYS_ARROW,
            "",
            (".arrow",),
            starting_with(ARROW_STREAM_MAGIC, "an nsys Arrow export"),
            None,
            t.SOURCE_NSYS,
        ),
        Reader(tf.NSYS_REP, "", NSYS_REP_SUFFIXES, _sniff_nsys_rep, None, t.SOURCE_NSYS),
        Reader(
            tf.XPROF_JSON,
            "XProf/Perfetto .json.gz",
            XPROF_JSON_SUFFIXES,
            _sniff_xprof_json,
            _xprof_json,
            t.SOURCE_XPROF,
        ),
        Reader(tf.KINETO, KINETO_WORDS, KINETO_SUFFIXES, _sniff_kineto, _kineto, t.SOURCE_KINETO),
        Reader(tf.CUPTI, "", (), _sniff_cupti, _cupti, t.SOURCE_CUPTI, one_file=False),
        Reader(
            tf.ROCPD, "rocpd .rpd", (".rpd",), sqlite_with(ROCPD_TABLES, "a rocpd database"), "analyzers.ingest.rocpd"
        ),
        Reader(
            tf.NSYS_JAX,
            "nsys-jax .zip",
            (".zip",),
            _sniff_nsys_jax,
            "analyzers.ingest.nsys_jax",
            t.SOURCE_NSYS_JAX,
            framework="jax",
        ),
    )
}
"""The formats, by kind, in the order their `sniff` is asked: each built-in kind (`tracer.core.trace_formats`) has
its one entry (a test holds it); `register` adds others."""


def register(reader: Reader) -> None:
    """A format added from outside this module (a user's own reader, a test's): asked before the built-in
    ones, since a new format is a more specific content than what they claim (any JSON, any SQLite file)."""
    formats = {reader.kind: reader, **{k: r for k, r in READERS.items() if k != reader.kind}}
    READERS.clear()
    READERS.update(formats)


def file_kinds() -> tuple[str, ...]:
    """The kinds one file can be imported or analysed as."""
    return tuple(kind for kind, r in READERS.items() if r.one_file)


def readable() -> str:
    """The formats in words, for help texts and refusals (the registered ones: a format added by a
    registration is said with the rest)."""
    return ", ".join(r.words for r in READERS.values() if r.words)


def reader_of(kind: str | None) -> Reader | None:
    return READERS.get(kind or "")


def sniffed(look: Look) -> tuple[str, str] | None:
    """(kind, the format in words) of the first format whose `sniff` claims what was seen, or None."""
    for r in READERS.values():
        what = r.sniff(look)
        if what is not None:
            return r.kind, what
    return None


def by_name(name: str) -> str | None:
    """The kind a file's name says, where its content said none: of the formats whose suffixes it ends with
    (nsys-jax's `.zip` left out: any zip), the most general one (`x.trace.json.gz` is taken for Kineto's
    `.json.gz`, not XProf's `.trace.json.gz`)."""
    lower = name.lower()
    ends = [
        (len(s), kind) for kind, r in READERS.items() if kind != tf.NSYS_JAX for s in r.suffixes if lower.endswith(s)
    ]
    return min(ends, key=lambda e: e[0])[1] if ends else None


def stem(file_name: str) -> str:
    """A trace file's name without the longest of the formats' suffixes it ends with (`run_nsys2024.6.sqlite` ->
    `run_nsys2024.6`, `w0.1623.pt.trace.json.gz` -> `w0.1623`): the rest tells files of one folder apart."""
    lower = file_name.lower()
    ends = [s for r in READERS.values() for s in r.suffixes if lower.endswith(s) and len(s) < len(file_name)]
    return file_name[: -max(map(len, ends))] if ends else file_name
