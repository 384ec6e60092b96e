"""The one reader of run-folder files: what a run holds is read only from regular files (a FIFO at
`run.json` would block every reader for ever; it is refused from its `stat`, never opened), every table
is checked against its declared schema before a reader takes it, and reads are bounded. Damage is
returned as a `Problem` of that run, never raised: one damaged run never blinds a folder.

The problems are `tracer.core.problems.Problem`s, the records a run folder collects (`RunFolder.problems`)
and the command line, the viewer and the notebook show; the readers here are plain functions of a path
so that every consumer, with or without a run object, reads the same way.
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from tracer.core.problems import Problem

if TYPE_CHECKING:  # imported where a table is read: a command that reads only bytes starts without Arrow
    import pyarrow as pa

MAX_TEXT_BYTES = 64 << 20
"""run.json, a manifest, a trace's metadata: small files; one larger than this is not one of ours."""

FILE_KINDS = {  # what a path that is not a regular file is, in words (output.py says it too)
    stat.S_IFDIR: "a folder",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
}


def not_regular(path: Path) -> str | None:
    """Why `path` (symlinks followed) is no regular file to read ('a FIFO (named pipe)' ...), None when
    it is one or is absent. Only `stat`: nothing is opened."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as e:
        return e.strerror or type(e).__name__
    if stat.S_ISREG(mode):
        return None
    return f"{FILE_KINDS.get(stat.S_IFMT(mode), 'not a regular file')}, not a file"


def read_bytes(path: Path, limit: int = MAX_TEXT_BYTES) -> bytes | Problem | None:
    """A small file's bytes; None when absent; a Problem when it is no regular file, too large or unreadable."""
    why = not_regular(path)
    if why is not None:
        return Problem(str(path), why)
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        return None
    except OSError as e:
        return Problem(str(path), e.strerror or type(e).__name__)
    if len(data) > limit:
        return Problem(str(path), f"larger than {limit >> 20} MiB")
    return data


def _compatible(found: pa.DataType, declared: pa.DataType) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(found):
        found = found.value_type
    if found == declared:
        return True
    if pa.types.is_string(declared):
        return pa.types.is_string(found) or pa.types.is_large_string(found)
    if pa.types.is_integer(declared):
        return pa.types.is_integer(found)
    if pa.types.is_floating(declared):
        return pa.types.is_floating(found) or pa.types.is_integer(found)
    return False


def schema_problem(found: pa.Schema, declared: pa.Schema, optional: frozenset[str] = frozenset()) -> str | None:
    """Why a table's schema is not the declared one (a declared column missing, or of another kind);
    extra columns are fine (a newer writer), and so are missing `optional` ones (an older one)."""
    names = set(found.names)
    missing = [f.name for f in declared if f.name not in names and f.name not in optional]
    if missing:
        return f"no column {', '.join(missing[:4])}; it holds {', '.join(found.names[:6]) or 'no column'}"
    for field in declared:
        if field.name in names:
            kind = found.field(field.name).type
            if not _compatible(kind, field.type):
                return f"column {field.name} holds {kind}, not {field.type}"
    return None


def table_problem(path: Path, declared: pa.Schema, optional: frozenset[str] = frozenset()) -> str | None:
    """Why the Parquet table at `path` cannot be read as `declared` (no regular file, an unreadable
    footer, a schema of other columns), or None when it can or is absent. Only the footer is read,
    once per version of the file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return e.strerror or type(e).__name__
    if not stat.S_ISREG(st.st_mode):
        return not_regular(path)
    return _table_problem(str(path), st.st_ino, st.st_size, st.st_mtime_ns, declared, optional)


@functools.lru_cache(maxsize=1024)
def _table_problem(
    path: str, ino: int, size: int, mtime_ns: int, declared: pa.Schema, optional: frozenset[str]
) -> str | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if size == 0:
        return "empty (0 bytes)"
    try:
        found = pq.read_schema(path)
    except (pa.ArrowException, OSError, ValueError) as e:
        return (str(e).splitlines() or [type(e).__name__])[0].replace(path, "").strip(" :'") or type(e).__name__
    return schema_problem(found, declared, optional)


def parquet(path: Path | pa.Buffer, columns: list[str] | None = None) -> pa.Table:
    """The Parquet file at `path` (only `columns` when given). Not `pq.read_table`: its pyarrow.dataset import
    brings pandas (0.2-0.4 s of CPU)."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as file:
        return file.read(columns=columns)


def read_table(
    path: Path, declared: pa.Schema, columns: list[str] | None = None, optional: frozenset[str] = frozenset()
) -> pa.Table | Problem | None:
    """The table at `path` (only `columns` when given), None when absent, a Problem when damaged."""
    import pyarrow as pa

    why = table_problem(path, declared, optional)
    if why is not None:
        return Problem(str(path), why)
    if not path.exists():
        return None
    try:
        return parquet(path, columns)
    except (pa.ArrowException, OSError, ValueError) as e:
        return Problem(str(path), (str(e).splitlines() or [type(e).__name__])[0])
