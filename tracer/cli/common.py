"""What every subcommand module shares: consoles and number formatting."""

from __future__ import annotations

import sys

from rich.console import Console


def console() -> Console:
    """Wide when piped, so tables are not cut to 80 columns in logs."""
    return Console(stderr=False, highlight=False, width=None if sys.stdout.isatty() else 200)


def err_console() -> Console:
    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)


def fmt(value: float | int | None, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)
