"""What was damaged in a run folder and skipped, as records a reader keeps and its caller shows.

A reader that meets a damaged file (a Parquet table that is not one, an events line that is not UTF-8)
skips what the file holds and says so here instead of printing: the run's `Problems` travels with the
folder (`RunFolder.problems`), so the command line prints each once on stderr, the viewer shows them
in the run's messages, and the notebook lists them, each reading the same records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator


@dataclass(frozen=True)
class Problem:
    """One damaged file: which, and what is wrong with it (what it held is skipped)."""

    file: str
    what: str

    def text(self) -> str:
        return f"{self.file} is damaged ({self.what}); what it holds is skipped"


class Problems:
    """The problems met reading one run folder, each file once, in the order met."""

    def __init__(self) -> None:
        self._by_file: dict[str, Problem] = {}

    def add(self, file: Path | str, what: str) -> Problem:
        """Records that `file` is damaged (the first reason met stands); pyarrow's own naming of the file
        is taken out of `what`, which says only what is wrong."""
        key = str(file)
        what = what.replace(f"'{key}'", "").replace(key, "").strip() or "unreadable"
        return self._by_file.setdefault(key, Problem(key, what))

    def __iter__(self) -> Iterator[Problem]:
        return iter(list(self._by_file.values()))

    def __len__(self) -> int:
        return len(self._by_file)

    def __bool__(self) -> bool:
        return bool(self._by_file)

    def __repr__(self) -> str:
        return f"Problems({list(self._by_file.values())!r})"
