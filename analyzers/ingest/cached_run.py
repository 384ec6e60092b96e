"""A trace named on any command (`analyze`, `show`, `diagnose`, `compare`, `diff`, `gate`, `export-trace`,
`view`), imported into the tool's cache by `tracer import`'s own path (`analyzers.ingest.import_run`): the
same run.json, the same steps from the trace's own ranges, the same tables, so every command gives the same
answer for a file and for its import. Two paths had given two answers (issue 51): a trace file read into a
folder of bare tables had no steps, and `diff` of two DataLoader traces led with kernels, not data wait.

Where the cache lies and how much of it is kept: `analyzers.ingest.import_cache`."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from analyzers.ingest import import_cache
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder, find_run, list_runs
from tracer.core.schema import RUN_JSON


def is_trace_ref(ref: str) -> bool:
    """Whether `ref` names a trace rather than a run: an existing file, or a folder that is neither a run
    nor a folder of runs and holds a trace (a trace folder, a profile folder, several ranks' traces). An
    empty or blank ref names nothing (`Path("")` would be the current folder), and a folder with no trace
    (`/`) is no trace: `find_run` refuses either in one line."""
    if not ref.strip():
        return False
    path = Path(ref)
    if path.is_file():
        return True
    if not path.is_dir() or (path / RUN_JSON).exists() or list_runs(path):
        return False
    from analyzers.ingest.pipeline import holds_trace

    return holds_trace(path)


def run_folder(ref: str, runs_dir: Path) -> RunFolder:
    """The run `ref` names: a trace imported into the cache (`cached_import`), else a run by path or id."""
    return cached_import(Path(ref)) if is_trace_ref(ref) else find_run(runs_dir, ref)


def cached_import(path: Path) -> RunFolder:
    """`tracer import PATH` into the cache, once, kept under a key of the path's resolved name, size and mtime
    (a changed or replaced file gets a fresh import; nothing is written beside the file, which may sit in a
    read-only place; raw/ links to the trace rather than copying it). Made in a scratch folder and renamed
    into place, so an interrupted import is never taken for a finished one."""
    from analyzers.ingest.import_run import ImportLabels, disk_full, import_trace

    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or folder")
    root = import_cache.imports_root()
    final = root / import_cache.cache_name(path)
    if (final / import_cache.DONE).exists():
        import_cache.touch(final)
        return RunFolder(final)
    try:
        with tempfile.TemporaryDirectory(prefix=f".{final.name}-", dir=root) as tmp:
            made = import_trace([path], Path(tmp), ImportLabels(), link_files=True).folder
            if final.exists():  # an unfinished or older-format entry of this name: replaced
                shutil.rmtree(final, ignore_errors=True)
            try:
                os.replace(made.path, final)
            except OSError:  # another process finished the same import first: theirs is as good
                if not (final / import_cache.DONE).exists():
                    raise
    except (OSError, UserError) as e:  # the import names a full disk in its own words, for `--out`
        full = import_cache.full_cache(root, e, bool(disk_full(root, e)))
        if full is None:
            raise
        raise full from None
    import_cache.evict(root, final)
    return RunFolder(final)
