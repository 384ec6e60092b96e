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
from collections.abc import Iterable
from pathlib import Path

from tracer.core.errors import UserError
from tracer.core.output import check_target
from tracer.core.output import resolved as resolved_path
from tracer.core.paths import writable_dir
from tracer.core.schema import RUN_JSON


def path_arg(text: str) -> Path:
    """argparse `type` for a path option: an empty value would silently mean the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name a path (use . for the current folder)")
    return Path(text)


def protected_owner(path: Path, datasets: Iterable[Path] = (), flag: str = "the path") -> tuple[str, Path] | None:
    """('run folder' or 'dataset', its folder) that `path` (resolved) is or lies in; None for neither.
    A dataset is one this command reads (`datasets`), a generated one, or a user's folder a run here
    has trained from, or a folder shaped as one (`tracer.measure.dataset.is_dataset`)."""
    from tracer.measure.dataset import datasets_root, is_dataset  # NumPy and PIL: only when a path is checked

    resolved = resolved_path(path, flag)
    named = {resolved_path(Path(d), "--dataset") for d in datasets}
    generated = datasets_root().resolve()
    for folder in (resolved, *resolved.parents):
        if (folder / RUN_JSON).is_file():
            return "run folder", folder
        if folder in named or folder == generated or is_dataset(folder):
            return "dataset", folder
    return None


def _refuse_protected(path: Path, flag: str, datasets: Iterable[Path]) -> None:
    owner = protected_owner(path, datasets, flag)
    if owner is not None:
        kind, folder = owner
        where = "is" if resolved_path(path, flag) == folder else "lies inside"
        raise UserError(
            f"{flag} {path} {where} the {kind} {folder}: runs and datasets are never written into;"
            " name a path outside them"
        )


def output_file(path: Path, flag: str, datasets: Iterable[Path] = ()) -> Path:
    """Checks a file the command will write, before any work (the writer, `tracer.core.output`, checks
    it again when it writes); returns it as given."""
    _refuse_protected(path, flag, datasets)
    check_target(path, flag)
    return path


def output_dir(path: Path, flag: str = "--out", datasets: Iterable[Path] = ()) -> Path:
    """Checks (and creates) a folder the command will write into, before any work."""
    resolved_path(path, flag)  # a symlink loop: one line
    _refuse_protected(path, flag, datasets)
    return writable_dir(path, flag)
