"""How a function of a run folder takes a part its caller may already hold. A `Run` (analyzers.run) keeps
each part it computed once; a bare `RunFolder` has none, so the part is computed. Looked up by name, so
that no module below the run object imports it (the import graph has no cycle: tests/test_layers.py)."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

T = TypeVar("T")


def part(folder: Any, name: str, make: Callable[[], T], warmup: int | None = None) -> T:
    """`folder.<name>` where the folder is a run that keeps it (with the same warm-up, where it matters),
    else `make()`."""
    if hasattr(type(folder), name) and (warmup is None or getattr(folder, "warmup", warmup) == warmup):
        value: T = getattr(folder, name)
        return value
    return make()
