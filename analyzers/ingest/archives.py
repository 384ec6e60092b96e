"""Bounds on what an archive may unpack to (a `.tar[.gz]` of ranks' traces, an nsys-jax `.zip`), declared
once: a few MB of compressed zeros must never fill the disk or the memory before any check. Members are
streamed, counted as they come (a member's declared size may lie), and refused past a bound in one line."""

from __future__ import annotations

import os
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from analyzers.ingest.readers import readable
from tracer.core import trace_formats as tf
from tracer.core.errors import UserError

MEMBER_MAX_BYTES = 8 << 30
"""Uncompressed bytes of one archive member: well over any trace of a training job (a 1 M-event Kineto
JSON is ~300 MB)."""
ARCHIVE_MAX_BYTES = 32 << 30
"""Uncompressed bytes of all an archive's members together (every rank's trace)."""
MEMBER_MAX_ENV = "TRACER_ARCHIVE_MEMBER_MAX_MIB"
ARCHIVE_MAX_ENV = "TRACER_ARCHIVE_MAX_MIB"
CHUNK = 1 << 20


def _bound(env: str, default: int) -> int:
    """A bound, lowered (or raised) through its environment variable, in MiB."""
    try:
        return int(float(os.environ[env]) * (1 << 20))
    except (KeyError, ValueError):
        return default


class Budget:
    """What is left of one archive's bound while its members are unpacked."""

    def __init__(self, archive: Path) -> None:
        self.archive = archive
        self.member_max = _bound(MEMBER_MAX_ENV, MEMBER_MAX_BYTES)
        self.left = _bound(ARCHIVE_MAX_ENV, ARCHIVE_MAX_BYTES)

    def check_declared(self, name: str, size: int) -> None:
        """Refuses a member whose declared size is already past a bound (before a byte is written)."""
        self._check(name, size)

    def copy(self, name: str, source: IO[bytes], target: IO[bytes]) -> int:
        """`source` into `target` chunk by chunk, counted against both bounds; the bytes copied."""
        done = 0
        while chunk := source.read(CHUNK):
            done += len(chunk)
            self._check(name, done)
            target.write(chunk)
        self.left -= done
        return done

    def _check(self, name: str, size: int) -> None:
        if size > self.member_max:
            raise UserError(
                f"{self.archive}: member {name} unpacks to more than {self.member_max >> 20} MiB, past the bound "
                f"on one member ({MEMBER_MAX_ENV}); unpack it yourself and import the trace file"
            )
        if size > self.left:
            raise UserError(
                f"{self.archive}: its members unpack to more than the bound on one archive "
                f"({_bound(ARCHIVE_MAX_ENV, ARCHIVE_MAX_BYTES) >> 20} MiB, {ARCHIVE_MAX_ENV}); unpack it yourself "
                "and import the trace files"
            )


def is_archive(path: Path) -> bool:
    return path.is_file() and path.name.lower().endswith(tf.ARCHIVE_SUFFIXES)


def extract(archive: Path, out: Path, is_trace: Callable[[Path], bool]) -> list[Path]:
    """An archive's trace files (`is_trace`) extracted flat into `out` (regular members only: no path leaves
    it), each streamed and bounded (`Budget`)."""
    out.mkdir(parents=True, exist_ok=True)
    found = []
    budget = Budget(archive)
    try:
        with tarfile.open(archive) as tar:
            for member in tar:
                name = Path(member.name).name
                if not member.isfile() or not name or name.startswith("."):
                    continue
                target = out / name
                if target.exists():
                    raise UserError(f"{archive}: two members are named {name}; unpack it and name the files")
                budget.check_declared(name, member.size)
                source = tar.extractfile(member)
                if source is None:
                    continue
                try:
                    with source, target.open("wb") as f:
                        budget.copy(name, source, f)
                except UserError:
                    target.unlink(missing_ok=True)
                    raise
                if is_trace(target):
                    found.append(target)
                else:
                    target.unlink()
    except (tarfile.TarError, OSError, EOFError) as e:
        raise UserError(f"{archive}: not a readable tar archive ({e})") from None
    if not found:
        raise UserError(f"{archive}: no trace file inside ({readable()})")
    return sorted(found)
