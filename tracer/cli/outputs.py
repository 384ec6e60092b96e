"""The one guard for every file or folder a user names for the tool to write (`compare --csv`,
`view --screenshot`, `export-trace`, `report --out`, `profile --out`, `import --out`, `campaign --out`,
`data make --out`).

A run folder and a dataset are what every later command reads, so nothing is ever written inside one:
the path is resolved through symlinks first (a link to `run.json` is the run's own file). A target that
exists and is no regular file (a device such as /dev/full, a FIFO, a socket, /proc/self/fd/1) is
refused, so no temporary file is ever renamed over a device node.
"""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from tracer.core.errors import UserError
from tracer.core.schema import RUN_JSON
from tracer.paths import writable_dir

_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
}


def path_arg(text: str) -> Path:
    """argparse `type` for a path option: an empty value would silently mean the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name a path (use . for the current folder)")
    return Path(text)


def protected_owner(path: Path, datasets: Iterable[Path] = ()) -> tuple[str, Path] | None:
    """('run folder' or 'dataset', its folder) that `path` (resolved) is or lies in; None for neither.
    A dataset is one this command reads (`datasets`), a generated one, or a user's folder a run here
    has trained from (`tracer.dataset.is_dataset`)."""
    from tracer.dataset import datasets_root, is_dataset  # NumPy and PIL: only when a path is checked

    resolved = path.expanduser().resolve()
    named = {Path(d).expanduser().resolve() for d in datasets}
    generated = datasets_root().resolve()
    for folder in (resolved, *resolved.parents):
        if (folder / RUN_JSON).is_file():
            return "run folder", folder
        if folder in named or folder == generated or is_dataset(folder):
            return "dataset", folder
    return None


def _refuse_protected(path: Path, flag: str, datasets: Iterable[Path]) -> None:
    owner = protected_owner(path, datasets)
    if owner is not None:
        kind, folder = owner
        where = "is" if path.expanduser().resolve() == folder else "lies inside"
        raise UserError(
            f"{flag} {path} {where} the {kind} {folder}: runs and datasets are never written into;"
            " name a path outside them"
        )


def output_file(path: Path, flag: str, datasets: Iterable[Path] = ()) -> Path:
    """Checks a file the command will write, before any work; returns it as given."""
    _refuse_protected(path, flag, datasets)
    try:
        mode = os.stat(path).st_mode  # follows symlinks: /proc/self/fd/1 is whatever stdout is
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise UserError(f"{flag} {path}: cannot use it ({e.strerror or e}); name a regular file") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise UserError(f"{flag} {path} is a folder: name the file to write inside it")
    if mode is not None and not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise UserError(f"{flag} {path} is {kind}: name a regular file to write")
    if not path.expanduser().resolve().parent.is_dir():
        raise UserError(f"{flag} {path}: its folder does not exist; create it first, or name a file in an existing one")
    return path


def output_dir(path: Path, flag: str = "--out", datasets: Iterable[Path] = ()) -> Path:
    """Checks (and creates) a folder the command will write into, before any work."""
    _refuse_protected(path, flag, datasets)
    return writable_dir(path, flag)
