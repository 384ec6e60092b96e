"""What a file or folder is, from its content: the trace kind it can be read as
(`tracer.core.trace_formats`), or, for anything else, the format seen in words, so that a refusal
names it ("a gzip-compressed tar archive", "an SQLite database with tables users, orders").

Why by content: a name says little (`trace.json.gz` may be a tar of traces, `.db` any database), and
gzip, tar, zip and SQLite each say what they are in their first bytes. Only the first few KiB of a
file are read (a gzip member is decompressed that far), and an SQLite file is opened read-only for
its table names.
"""

from __future__ import annotations

import gzip
import sqlite3
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from tracer.core import trace_formats as tf

HEAD_BYTES = 64 << 10
"""How much of a file (decompressed, for gzip) is looked at."""
SQLITE_MAGIC = b"SQLite format 3\x00"
ARROW_STREAM_MAGIC = b"\xff\xff\xff\xff"
"""An Arrow IPC stream's first message starts with this continuation marker."""
GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"
TAR_MAGIC_AT = 257  # "ustar" in a POSIX tar header
NSYS_TABLES = frozenset({"StringIds", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "TARGET_INFO_GPU"})
"""Any of these makes an SQLite file an nsys export."""
ROCPD_TABLES = frozenset({"rocpd_op", "rocpd_api", "rocpd_string"})
"""All of these make it a rocpd (rocprof / rocmProfileData) database."""
XPROF_HOST_MARK = b'"/host:'
XPROF_DEVICE_MARK = b'"/device:'
"""Process names of a trace XProf converted from XPlane (jax.profiler's perfetto_trace.json.gz)."""
NSYS_JAX_TRACE = "nvtx_gpu_proj_trace/trace.parquet"
NSYS_JAX_THREADS = "thread-metadata.parquet"
"""The nsys-jax archive's recipe output (NVTX ranges projected onto the GPU) and its thread names."""


@dataclass(frozen=True)
class Seen:
    kind: str | None  # a `trace_formats` kind, or None: not readable
    what: str  # the format in words, for a refusal


WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")
"""The byte-order marks of UTF-16 (LE, BE) and UTF-32 (LE begins as UTF-16 LE's; BE)."""


def sniff(path: Path) -> Seen:
    if path.is_dir():
        return _folder(path)
    try:
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as e:
        return Seen(None, f"unreadable ({e.strerror or e})")
    if path.name.lower().endswith(tf.SUFFIXES[tf.XPLANE]):  # 0 bytes: a profiler that died before writing
        return Seen(tf.XPLANE, "an XPlane profile") if head else Seen(None, "an empty file")
    if head.startswith(SQLITE_MAGIC):
        return _sqlite(path)
    if head.startswith(ARROW_STREAM_MAGIC):
        return Seen(tf.NSYS_ARROW, "an nsys Arrow export")
    if head.startswith(GZIP_MAGIC):
        return _gzip(path)
    if head.startswith(ZIP_MAGIC):
        return _zip(path)
    if head[TAR_MAGIC_AT : TAR_MAGIC_AT + 5] == b"ustar":
        return Seen(None, "a tar archive (unpack it and import the trace inside)")
    if head.startswith(WIDE_BOMS) or (b"\0" in head[:4] and head.replace(b"\0", b"").lstrip()[:1] in (b"{", b"[")):
        return Seen(None, "UTF-16 or UTF-32 text (save it as UTF-8, as JSON traces are written)")
    if head.lstrip()[:1] in (b"{", b"["):
        return _json(head)
    if head.startswith(b"NVIDIA Tegra Profiler Report") or path.name.lower().endswith(tf.SUFFIXES[tf.NSYS_REP]):
        return Seen(tf.NSYS_REP, "an nsys report")
    if not head:
        return Seen(None, "an empty file")
    named = _by_name(path.name)
    if named is not None:  # its reader then says what is wrong inside (a truncated export, a damaged report)
        return Seen(named, f"a file named as {named} whose content is not")
    return Seen(None, "a file of no format this tracer knows")


def _by_name(name: str) -> str | None:
    lower = name.lower()
    return next((kind for kind, ends in tf.SUFFIXES.items() if lower.endswith(ends) and kind != tf.NSYS_JAX), None)


def _json(head: bytes) -> Seen:
    if XPROF_HOST_MARK in head or XPROF_DEVICE_MARK in head:
        return Seen(tf.XPROF_JSON, "a trace XProf wrote (jax.profiler's Perfetto JSON)")
    return Seen(tf.KINETO, "a Chrome-trace JSON file")


def _gzip(path: Path) -> Seen:
    try:
        with gzip.open(path, "rb") as f:
            inner = f.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return Seen(None, "a damaged or truncated gzip file")
    if inner[TAR_MAGIC_AT : TAR_MAGIC_AT + 5] == b"ustar":
        return Seen(None, "a gzip-compressed tar archive (unpack it and import the trace inside)")
    if inner.startswith(SQLITE_MAGIC):
        return Seen(None, "a gzip-compressed SQLite database (gunzip it, then import the database)")
    if inner.lstrip()[:1] in (b"{", b"["):
        seen = _json(inner)
        return Seen(seen.kind, f"{seen.what}, gzip-compressed")
    return Seen(None, "a gzip-compressed file that is not JSON")


def _zip(path: Path) -> Seen:
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (OSError, zipfile.BadZipFile):
        return Seen(None, "a damaged zip archive")
    if any(n.endswith(NSYS_JAX_TRACE) for n in names):
        return Seen(tf.NSYS_JAX, "an nsys-jax archive")
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return Seen(None, f"a zip archive of {len(names)} files ({shown}) with no nsys-jax recipe output in it")


def _sqlite(path: Path) -> Seen:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        finally:
            con.close()
    except sqlite3.Error as e:
        return Seen(None, f"a damaged SQLite database ({e})")
    if tables & NSYS_TABLES:
        return Seen(tf.NSYS_SQLITE, "an nsys SQLite export")
    if ROCPD_TABLES <= tables:
        return Seen(tf.ROCPD, "a rocpd database")
    names = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
    return Seen(None, f"an SQLite database with tables {names or '(none)'}, neither an nsys export nor a rocpd file")


def _folder(path: Path) -> Seen:
    if path.name == "cupti":
        return Seen(tf.CUPTI, "our CUPTI records")
    if (path / NSYS_JAX_TRACE).is_file():
        return Seen(tf.NSYS_JAX, "an unpacked nsys-jax archive")
    return Seen(None, "a folder")


def xplanes(folder: Path) -> list[Path]:
    """The XPlane files of a profile folder (`logdir/plugins/profile/<run>/<host>.xplane.pb`, as
    jax.profiler and TensorFlow's profiler write them), newest run first."""
    found = sorted(folder.rglob("*" + tf.SUFFIXES[tf.XPLANE][0]), key=lambda p: (p.stat().st_mtime, str(p)))
    return found[::-1]
