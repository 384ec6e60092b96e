"""The issues' "one CPU hog" load: one busy-looping Python process for as long as a benchmark measures, so
that a figure holds on a busy machine too (`--hog` of the benchmarks)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def cpu_hog(enabled: bool = True) -> Iterator[bool]:
    """Runs the hog inside the block when `enabled`; yields whether one runs. It is killed on the way out."""
    hog = subprocess.Popen([sys.executable, "-c", "while 1: pass"]) if enabled else None
    try:
        yield hog is not None
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
