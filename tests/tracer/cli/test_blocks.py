"""The printers commands share (tracer/cli/blocks.py), on a real console writing to a string."""

from __future__ import annotations

import io

from rich.console import Console

from analyzers.report.shown import Diagnosis
from tracer.cli.blocks import print_diagnosis, print_step_parts


def _console() -> Console:
    return Console(file=io.StringIO(), width=120, no_color=True)


def test_a_diagnosis_that_broke_is_one_line_not_a_crash() -> None:
    out = _console()
    print_diagnosis(Diagnosis(unavailable="ValueError: no steps [table]"), out)
    assert out.file.getvalue() == "Diagnosis\n  not available: ValueError: no steps [table]\n"  # type: ignore[attr-defined]


def test_no_step_parts_print_nothing() -> None:
    out = _console()
    print_step_parts(None, out)
    assert out.file.getvalue() == ""  # type: ignore[attr-defined]
