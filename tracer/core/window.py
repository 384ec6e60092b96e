"""The trace window (`--trace-window`): which part of a run the trace backends record.

A long run is sampled from start to end, but traced only in a window: whole epochs (`2`, `2-3`) or
steps of one epoch (`2:100-200`, steps numbered from 0 as in the per-step table, both ends included).
`all` traces the whole run. Without the option, a traced run of more than DEFAULT_ABOVE_EPOCHS
epochs traces epoch DEFAULT_EPOCH only (a whole 100-epoch run under nsys would write hundreds of
millions of records); shorter runs are traced whole, as before.

This module parses and checks the text; the worker gets the parsed bounds (`worker_bounds`), and
`analyzers.trace.trace_window` maps a run's window to its time range.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tracer.core.errors import UserError

ALL = "all"
DEFAULT_EPOCH = 2
DEFAULT_ABOVE_EPOCHS = 3
SYNTAX = "EPOCH, FIRST-LAST epochs, EPOCH:FIRST-LAST steps (from 0), or all"
_PATTERN = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?(?::\s*(\d+)\s*-\s*(\d+)\s*)?$")


@dataclass(frozen=True)
class TraceWindow:
    """Epochs `first_epoch`..`last_epoch` (from 1), or steps `first_step`..`last_step` of one epoch."""

    first_epoch: int
    last_epoch: int
    first_step: int | None = None
    last_step: int | None = None

    @property
    def text(self) -> str:
        """The option's value that gives this window."""
        if self.first_step is not None:
            return f"{self.first_epoch}:{self.first_step}-{self.last_step}"
        if self.first_epoch == self.last_epoch:
            return str(self.first_epoch)
        return f"{self.first_epoch}-{self.last_epoch}"

    @property
    def label(self) -> str:
        """How tables name what they cover: "epoch 2", "epochs 2-3", "epoch 2 steps 100-200"."""
        if self.first_step is not None:
            return f"epoch {self.first_epoch} steps {self.first_step}-{self.last_step}"
        if self.first_epoch == self.last_epoch:
            return f"epoch {self.first_epoch}"
        return f"epochs {self.first_epoch}-{self.last_epoch}"

    def worker_bounds(self) -> dict[str, int | None]:
        """What the worker's gate (`tracer/worker/window.py`) opens and closes the trace at."""
        return {
            "first_epoch": self.first_epoch,
            "last_epoch": self.last_epoch,
            "first_step": self.first_step,
            "last_step": self.last_step,
        }


def parse(text: str | None) -> TraceWindow | None:
    """The window a value names; None for `all` (and for no value). ValueError says what is wrong."""
    if text is None or text.strip().lower() == ALL:
        return None
    m = _PATTERN.match(text)
    if not m:
        raise ValueError(f"'{text}' is not a trace window: give {SYNTAX}, e.g. 2, 2-3 or 2:100-200")
    first, last, step_lo, step_hi = m.groups()
    if last is not None and step_lo is not None:
        raise ValueError(f"'{text}': a step range applies to one epoch (e.g. 2:100-200), not to {first}-{last}")
    first_epoch = int(first)
    last_epoch = int(last) if last is not None else first_epoch
    if first_epoch < 1 or last_epoch < first_epoch:
        raise ValueError(f"'{text}': epochs count from 1 and the first comes before the last")
    if step_lo is not None and int(step_hi) < int(step_lo):
        raise ValueError(f"'{text}': the first step comes before the last")
    steps = (int(step_lo), int(step_hi)) if step_lo is not None else (None, None)
    return TraceWindow(first_epoch, last_epoch, *steps)


def check_text(text: str | None) -> str | None:
    """The pydantic check of the option's value (its error becomes one line naming the flag)."""
    window = parse(text)
    if text is None:
        return None
    return window.text if window is not None else ALL


def worker_window(text: str | None) -> dict[str, int | None] | None:
    """The window as `worker_config.json` holds it: its bounds, or None (trace the whole run)."""
    window = parse(text)
    return window.worker_bounds() if window is not None else None


def resolve(spec: Any) -> tuple[str | None, bool]:
    """The window a run is traced in (its text, `all`, or None where nothing traces), and whether it
    is the default rather than the user's choice. Checks the window against the run's epochs."""
    traced = spec.trace != "none" or bool(getattr(spec, "pyspy", False))
    if spec.trace_window is None:
        if not traced:
            return None, False
        return (str(DEFAULT_EPOCH) if spec.epochs > DEFAULT_ABOVE_EPOCHS else ALL), spec.epochs > DEFAULT_ABOVE_EPOCHS
    if not traced:
        raise UserError("--trace-window chooses what a trace records: give it with --trace (or --pyspy)")
    window = parse(spec.trace_window)
    if window is not None and window.last_epoch > spec.epochs:
        raise UserError(
            f"--trace-window {spec.trace_window} names epoch {window.last_epoch}, but the run has {spec.epochs}"
        )
    return spec.trace_window, False


def of_record(spec: Any) -> TraceWindow | None:
    """The window a run is or was traced in, from its spec or its record's measurement (both hold
    `trace_window`); None: the whole run, or a run from before windows."""
    text = getattr(spec, "trace_window", None)
    try:
        return parse(text)
    except ValueError:
        return None


def default_note(window_text: str, epochs: int) -> str:
    """The one line printed at the start of a run whose window is the default."""
    window = parse(window_text)
    label = window.label if window is not None else ALL
    return (
        f"trace window: {label} of {epochs} (the default for traced runs of more than {DEFAULT_ABOVE_EPOCHS} "
        f"epochs; the rest is sampled, not traced; --trace-window all traces every epoch)"
    )
