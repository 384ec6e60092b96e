"""The report's outputs: what one step wrote (a table, a figure, a section) and the step itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from analyzers.report import prose, tables


@dataclass
class Output:
    """One table or figure of the report and the files that hold it."""

    kind: str  # "table", "figure", "section" (headings with lines) or "findings" (the cases in sentences)
    title: str
    files: list[Path] = field(default_factory=list)
    caption: str = ""
    rows: list[tables.TableRow] = field(default_factory=list)
    device: str = ""
    text: list[tuple[str, list[str]]] = field(default_factory=list)  # kind "section": (heading, lines)
    findings: list[prose.CaseFindings] = field(default_factory=list)  # kind "findings": the cases in sentences


@dataclass(frozen=True)
class Step:
    description: str
    run: Callable[[], Output | None]
