"""Where the tracer keeps what outlives a run: framework environments and generated datasets."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """`TRACER_CACHE` if set, else `~/.cache/dl-tracer` (kept outside any clone so CI can reuse it)."""
    env = os.environ.get("TRACER_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "dl-tracer"


def writable_dir(path: Path, flag: str = "--out") -> Path:
    """Makes sure `path` is a folder this process can write into (creating it), before any work is
    done, so a bad output path is one line rather than a traceback after a run."""
    from tracer.core.errors import UserError

    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is a file, not a folder: name a folder to write into")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{flag} {path}: cannot create it ({e.strerror or e}); choose a folder you can write") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path} is not writable by this user: choose a folder you can write")
    return path
