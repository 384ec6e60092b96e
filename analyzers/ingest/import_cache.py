"""Where the tool keeps what it made of a trace file named on a command (the tool's cache: an import's
tables, `analyzers.ingest.cached_run`; an nsys export's summaries), and the rules that keep it harmless, one
policy for both: never inside a run folder (a cache folder linked into one would write there), a scratch
folder in the system's temp space when the cache cannot be written (a read-only home), a full cache named
with its path, and a bounded number of entries kept (the oldest used go first)."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from analyzers.ingest import readers
from tracer.core.errors import UserError
from tracer.core.output import resolved, run_folder_of
from tracer.core.paths import cache_root
from tracer.core.schema import RUN_JSON


def cache_name(path: Path) -> str:
    """The name a trace file's cached import or summary is kept under: its stem and a key of its resolved
    path, size and mtime (a changed or replaced file gets a new one)."""
    import hashlib

    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:16]
    return f"{readers.stem(path.name) or 'trace'}-{key}"


IMPORTS_DIR = "imports"
"""Under the tool's cache (`tracer.core.paths.cache_root`): the tables of trace files analysed directly."""
IMPORTS_KEPT = 16
"""Imports kept in the cache; each holds a whole trace's tables (up to GBs for a big one)."""
SUMMARIES_DIR = "summaries"
"""Under the tool's cache: one JSON file per nsys export summarised (`analyzers.ingest.nsys_summary`)."""
SUMMARIES_KEPT = 256
"""Summaries kept in the cache; each a few kB."""
TEMP_PREFIX = "dl-tracer-"
"""Under the system's temp folder, before the cache folder's name and the user id: the folder used when
the cache cannot be written (`dl-tracer-imports-0`)."""
DONE = RUN_JSON  # an import's run.json: written last, before the finished import is renamed into place


def cache_folder(name: str) -> Path:
    """The cache's folder `name`, made: the cache's, unless it lies inside a run folder (refused) or
    cannot be made (then one in the system's temp space)."""
    root = cache_root() / name
    where = resolved(root, "the tool's cache (TRACER_CACHE)")
    inside = run_folder_of(where)
    if inside is not None:
        raise UserError(
            f"the tool's cache {root} lies inside the run folder {inside} (a link?): runs are never written "
            "into; point TRACER_CACHE at a folder of its own"
        )
    try:
        root.mkdir(parents=True, exist_ok=True)
        if os.access(root, os.W_OK):
            return root
    except OSError:
        pass
    fallback = Path(tempfile.gettempdir()) / f"{TEMP_PREFIX}{name}-{os.getuid()}"
    fallback.mkdir(mode=0o700, exist_ok=True)
    return fallback


def imports_root() -> Path:
    """The folder imports go in (`cache_folder`)."""
    return cache_folder(IMPORTS_DIR)


def full_cache(root: Path, error: Exception, full: bool = False) -> UserError | None:
    """The one line for a write that filled the disk under `root` (its error says so, or the caller saw it:
    `full`), or None for another error."""
    if getattr(error, "errno", None) != errno.ENOSPC and not full:
        return None
    return UserError(
        f"disk full under {root} (the tool's cache): free space there, or point TRACER_CACHE at a folder with room"
    )


def _stamp(entry: Path) -> Path:
    """The file whose mtime says when an entry was last used: a finished import's DONE, a summary itself."""
    return entry / DONE if entry.is_dir() else entry


def evict(root: Path, keep: Path, kept: int = IMPORTS_KEPT) -> None:
    """The oldest-used finished entries beyond `kept` removed (`keep`, the one just used, stays)."""
    done = []
    for entry in root.iterdir():
        if entry.name.startswith(".") or entry == keep or entry.is_symlink():
            continue
        try:
            done.append((os.stat(_stamp(entry)).st_mtime, entry))
        except OSError:
            continue
    done.sort()
    for _, entry in done[: max(0, len(done) + 1 - kept)]:
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def touch(entry: Path) -> None:
    """Marks an entry used now (its stamp's mtime): eviction goes by last use."""
    try:
        os.utime(_stamp(entry))
    except OSError:
        pass
