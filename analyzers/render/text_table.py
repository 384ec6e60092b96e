"""A table as text cells: what a renderer returns for the terminal (a rich Table), a page or a CSV to draw,
so the words of a table are the analyzers' and only its drawing is the caller's."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TextTable:
    title: str
    headers: tuple[str, ...]
    rows: list[tuple[str, ...]] = field(default_factory=list)
