"""Where the tracer keeps what outlives a run: framework environments and generated datasets."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """`TRACER_CACHE` if set, else `~/.cache/dl-tracer` (kept outside any clone so CI can reuse it)."""
    env = os.environ.get("TRACER_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "dl-tracer"
