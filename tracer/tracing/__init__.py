"""Trace backends selected by `tracer profile --trace NAME`."""

from __future__ import annotations

from tracer.errors import UserError
from tracer.tracing.base import TraceBackend
from tracer.tracing.nsys import NsysBackend

BACKENDS: dict[str, type[TraceBackend]] = {
    "none": TraceBackend,
    "nsys": NsysBackend,
}


def names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def backend(name: str) -> TraceBackend:
    try:
        return BACKENDS[name]()
    except KeyError:
        raise UserError(f"unknown trace backend '{name}': choose one of {', '.join(BACKENDS)}") from None
