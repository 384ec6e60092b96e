"""What a file or folder is, from its content: the trace kind it can be read as
(`tracer.core.trace_formats`), or, for anything else, the format seen in words, so that a refusal
names it ("a gzip-compressed tar archive", "an SQLite database with tables users, orders").

Why by content: a name says little (`trace.json.gz` may be a tar of traces, `.db` any database), and
gzip, tar, zip and SQLite each say what they are in their first bytes. Only the first few KiB of a
file are read (a gzip member is decompressed that far), and an SQLite file is opened read-only for
its table names. What is seen (`readers.Look`) is handed to each registered format's `sniff`
(`analyzers.ingest.readers`), which says whether it is that format's; what no format claims is named here.
"""

from __future__ import annotations

import gzip
import sqlite3
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from analyzers.ingest import readers as r
from analyzers.ingest.readers import Look

HEAD_BYTES = 64 << 10
"""How much of a file (decompressed, for gzip) is looked at."""
SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"
TAR_MAGIC_AT = 257  # "ustar" in a POSIX tar header


@dataclass(frozen=True)
class Seen:
    kind: str | None  # a `trace_formats` kind, or None: not readable
    what: str  # the format in words, for a refusal


WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")
"""The byte-order marks of UTF-16 (LE, BE) and UTF-32 (LE begins as UTF-16 LE's; BE)."""


def _claimed(look: Look) -> Seen | None:
    """The first registered format (`analyzers.ingest.readers`) that claims what was seen."""
    claim = r.sniffed(look)
    return Seen(*claim) if claim is not None else None


def sniff(path: Path) -> Seen:
    if path.is_dir():
        return _claimed(Look(path, r.FOLDER)) or Seen(None, "a folder")
    try:
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as e:
        return Seen(None, f"unreadable ({e.strerror or e})")
    seen = _claimed(Look(path, r.HEAD, head))  # what a name or the first bytes alone say (XPlane, nsys Arrow)
    if seen is not None:
        return seen
    if head.startswith(SQLITE_MAGIC):
        return _sqlite(path)
    if head.startswith(GZIP_MAGIC):
        return _gzip(path)
    if head.startswith(ZIP_MAGIC):
        return _zip(path)
    if head[TAR_MAGIC_AT : TAR_MAGIC_AT + 5] == b"ustar":
        return Seen(None, "a tar archive (unpack it and import the trace inside)")
    if head.startswith(WIDE_BOMS) or (b"\0" in head[:4] and head.replace(b"\0", b"").lstrip()[:1] in (b"{", b"[")):
        return Seen(None, "UTF-16 or UTF-32 text (save it as UTF-8, as JSON traces are written)")
    if head.lstrip()[:1] in (b"{", b"["):
        return _json(path, head)
    seen = _claimed(Look(path, r.BYTES, head))  # no container: what the bytes or the name say (an nsys report)
    if seen is not None:
        return seen
    if not head:
        return Seen(None, "an empty file")
    named = r.by_name(path.name)
    if named is not None:  # its reader then says what is wrong inside (a truncated export, a damaged report)
        return Seen(named, f"a file named as {named} whose content is not")
    return Seen(None, "a file of no format this tracer knows")


def _json(path: Path, head: bytes) -> Seen:
    return _claimed(Look(path, r.JSON, head)) or Seen(None, "JSON of no format this tracer knows")


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
        seen = _json(path, inner)
        return Seen(seen.kind, f"{seen.what}, gzip-compressed")
    return Seen(None, "a gzip-compressed file that is not JSON")


def _zip(path: Path) -> Seen:
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (OSError, zipfile.BadZipFile):
        return Seen(None, "a damaged zip archive")
    seen = _claimed(Look(path, r.ZIP, members=tuple(names)))
    if seen is not None:
        return seen
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return Seen(None, f"a zip archive of {len(names)} files ({shown}) with no nsys-jax recipe output in it")


def _sqlite(path: Path) -> Seen:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        finally:
            con.close()
    except sqlite3.Error as e:
        return Seen(None, f"a damaged SQLite database ({e})")
    seen = _claimed(Look(path, r.SQLITE, tables=frozenset(tables)))
    if seen is not None:
        return seen
    names = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
    return Seen(None, f"an SQLite database with tables {names or '(none)'}, neither an nsys export nor a rocpd file")


def trace_files(folder: Path) -> list[Path]:
    """The trace files at a folder's top (one file each, by content: several ranks' traces, or the one trace
    `tracer import FOLDER` reads), in name order."""
    return sorted(p for p in folder.iterdir() if p.is_file() and sniff(p).kind in r.file_kinds())


PROFILE_RUN_DEPTHS = ("", "*/", "profile/*/", "plugins/profile/*/", "*/plugins/profile/*/")
"""Where a profile folder's XPlane files lie below the folder named: `<host>.xplane.pb` in a profile run
(`logdir/plugins/profile/<run>/`), named as the run, as `profile`, `plugins`, the logdir, or the parent of
a Keras TensorBoard logdir (`logs/train/plugins/...`). Bounded: a folder such as `/` is never walked."""


def xplanes(folder: Path) -> list[Path]:
    """The XPlane files of a profile folder (`logdir/plugins/profile/<run>/<host>.xplane.pb`, as
    jax.profiler and TensorFlow's profiler write them), newest run first."""
    pattern = "*" + r.XPLANE_SUFFIXES[0]
    paths = {p for depth in PROFILE_RUN_DEPTHS for p in folder.glob(depth + pattern) if p.is_file()}
    found = sorted(paths, key=lambda p: (p.stat().st_mtime, str(p)))
    return found[::-1]
