"""The one writer of every file a command makes for the user (`report`'s files, `compare --csv`,
`view --screenshot`, `export-trace`, a campaign's `epoch_times.csv`).

A file is written as a new file with a unique name in the target's folder, flushed to disk, then renamed
over the target: a reader never sees half a file, a full disk leaves the old file (or none) and no
temporary one, and two commands writing one target never share a temporary name. Before anything is
written the target is checked, and refused in one line (a `UserError`) when it is

- a symlink loop (nothing can be written there),
- a symlink to, or a hard link of, a file inside a run folder (writing through it would change the run),
- a file another name shares (a hard link: the other name would keep the old content or, written in
  place, change with it),
- not a regular file (a FIFO would block the command for ever; a device or a folder is no file to write),
- or in a folder that does not exist.

A symlink to a regular file elsewhere is written through: the file it points to is replaced.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from tracer.core.errors import UserError
from tracer.core.reading import FILE_KINDS
from tracer.core.schema import RUN_JSON


def resolved(path: Path, what: str) -> Path:
    """`path` with every symlink followed; a symlink loop is one line, not Python's RuntimeError."""
    try:
        return Path(path).expanduser().resolve()
    except RuntimeError:  # Python 3.11-3.12: "Symlink loop from ..."
        raise UserError(f"{what} {path} is a symlink loop: name a real file or folder") from None
    except OSError as e:  # Python 3.13: ELOOP
        raise UserError(f"{what} {path}: cannot follow it ({e.strerror or e}); name a real path") from None


def run_folder_of(path: Path) -> Path | None:
    """The run folder that the resolved `path` is or lies in (a folder holding a regular `run.json`), or None."""
    for folder in (path, *path.parents):
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.stat(folder / RUN_JSON).st_mode):
                return folder
    return None


def check_target(path: Path, what: str) -> Path:
    """The file that writing `path` will replace (symlinks followed), or a UserError saying why not."""
    target = resolved(path, what)
    run = run_folder_of(target)
    if run is not None:
        link = " (through a symlink)" if target != Path(path).expanduser().absolute() else ""
        raise UserError(
            f"{what} {path}{link} lies inside the run folder {run}: runs are never written into;"
            " name a path outside them"
        )
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UserError(f"{what} {path}: cannot use it ({e.strerror or e}); name a regular file") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = FILE_KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise UserError(f"{what} {path} is {kind}: name a regular file to write")
    if st is not None and st.st_nlink > 1:
        raise UserError(
            f"{what} {path} is a hard link ({st.st_nlink} names share that file, maybe one in a run folder):"
            " remove it or name another file"
        )
    if not target.parent.is_dir():
        raise UserError(f"{what} {path}: its folder does not exist; create it first, or name a file in an existing one")
    return target


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def replacing(path: Path, what: str) -> Iterator[Path]:
    """Yields a new, empty, uniquely named file beside the checked target for the caller to write (by
    name: matplotlib, Qt and Arrow write to a path); when the block ends without an exception the file
    is flushed to disk and renamed over the target, otherwise it is removed. A full disk or another
    OSError becomes one line."""
    target = check_target(path, what)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise UserError(f"{what} {path}: cannot write there ({e.strerror or e})") from None
    tmp = Path(name)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes it private; the file should read as any other
    finally:
        os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        check_target(path, what)  # the target may have been swapped for a link or a FIFO meanwhile
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{what} {path}: could not write it ({e.strerror or e}); nothing was written") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def open_replacing(path: Path, what: str, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """`replacing`, with the new file open in `mode` ("w" or "wb"; `newline`, `encoding` as `open`)."""
    with replacing(path, what) as tmp, open(tmp, mode, **kwargs) as f:
        yield f


def write_text(path: Path, text: str, what: str) -> Path:
    with open_replacing(path, what, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def write_bytes(path: Path, data: bytes, what: str) -> Path:
    with open_replacing(path, what, "wb") as f:
        f.write(data)
    return path


def csv_cell(value: object) -> object:
    """Empty for a missing value; a float at 15 significant digits, the shortest text that reads back as the
    same number (no 1.1600000000000001 from summing); anything else as it is."""
    if value is None:
        return ""
    return f"{value:.15g}" if isinstance(value, float) else value


def write_csv(path: Path, what: str, header: Iterable[str], rows: Iterable[Iterable[object]]) -> Path:
    """The one table writer of the tool's CSV files (Tables 1-2, `compare --csv`, the data-mode pairs):
    the header, then each row's cells through `csv_cell`, the file replaced whole or not at all."""
    import csv

    with open_replacing(path, what, newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows([csv_cell(c) for c in row] for row in rows)
    return path
