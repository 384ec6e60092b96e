"""Where a command keeps the import of a trace file named on it (the tool's cache; `analyzers.ingest.cached_run`),
and the rules that keep it harmless: never inside a run folder (a cache folder linked into one would write
there), a scratch folder in the system's temp space when the cache cannot be written (a read-only home), a
full cache named with its path, and no more than IMPORTS_KEPT imports kept (the oldest used go first)."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from tracer.core.errors import UserError
from tracer.core.output import resolved, run_folder_of
from tracer.core.paths import cache_root
from tracer.core.schema import RUN_JSON

IMPORTS_DIR = "imports"
"""Under the tool's cache (`tracer.core.paths.cache_root`): the tables of trace files analysed directly."""
IMPORTS_KEPT = 16
"""Imports kept in the cache; each holds a whole trace's tables (up to GBs for a big one)."""
TEMP_IMPORTS = "dl-tracer-imports"
"""Under the system's temp folder: imports made when the cache cannot be written."""
DONE = RUN_JSON  # an import's run.json: written last, before the finished import is renamed into place


def imports_root() -> Path:
    """The folder imports go in: the cache's, unless it lies inside a run folder (refused) or cannot be
    made (then one in the system's temp space)."""
    root = cache_root() / IMPORTS_DIR
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
    fallback = Path(tempfile.gettempdir()) / f"{TEMP_IMPORTS}-{os.getuid()}"
    fallback.mkdir(mode=0o700, exist_ok=True)
    return fallback


def full_cache(root: Path, error: Exception, full: bool = False) -> UserError | None:
    """The one line for an import that filled the disk under `root` (its error says so, or the caller saw it:
    `full`), or None for another error."""
    if getattr(error, "errno", None) != errno.ENOSPC and not full:
        return None
    return UserError(
        f"disk full under {root} (the tool's cache) while importing: free space there, or point TRACER_CACHE "
        "at a folder with room"
    )


def evict(root: Path, keep: Path) -> None:
    """The oldest-used finished imports beyond IMPORTS_KEPT removed (`keep`, the one just used, stays)."""
    done = []
    for entry in root.iterdir():
        if entry.name.startswith(".") or entry == keep or entry.is_symlink():
            continue
        try:
            done.append((os.stat(entry / DONE).st_mtime, entry))
        except OSError:
            continue
    done.sort()
    for _, entry in done[: max(0, len(done) + 1 - IMPORTS_KEPT)]:
        shutil.rmtree(entry, ignore_errors=True)


def touch(folder: Path) -> None:
    """Marks an import used now (its DONE file's mtime): eviction goes by last use."""
    try:
        os.utime(folder / DONE)
    except OSError:
        pass
