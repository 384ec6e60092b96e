"""Every trace format the ingest reads, registered once: its kind (`tracer.core.trace_formats`), whose rows it
gives (the tables' `source`), the framework it can only come from, and its reader. The ingest
(`analyzers.ingest.pipeline`) and the import (`analyzers.ingest.import_run`) look a format up here instead of
each keeping a chain of `if kind ==`; a new format is its reader module and one line in READERS.

A reader takes a path and returns a `Read`: the normalised tables, the clock they are on and what the trace
says of the run (`facts`: Kineto's batch, read from the recorded shapes). nsys is the exception: its
export is streamed into the run folder table by table (memory flat in the rows), so its entry has no
`read` and the pipeline streams it (`pipeline.ingest_nsys`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from analyzers.trace import tables as t
from analyzers.trace.clock import Clock
from tracer.core import trace_formats as tf


@dataclass(frozen=True)
class Read:
    """One trace, read: its tables, their clock, and the facts it records of the run."""

    tables: dict[str, pa.Table]
    clock: Clock
    facts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Reader:
    kind: str
    source: str  # the tables' `source` (a Chrome-trace JSON's reader may say paddle or mxnet row by row)
    framework: str | None  # the framework the format can only come from; None: any (nsys, rocprof, XPlane)
    read: Callable[[Path], Read] | None  # None: streamed into the folder (nsys)


def _kineto(path: Path) -> Read:
    from analyzers.ingest import kineto

    tables, clock, batch = kineto.parse(path)
    return Read(tables, clock, {t.BATCH_FACT: batch} if batch is not None else {})


def _cupti(path: Path) -> Read:
    from analyzers.ingest import cupti

    return Read(*cupti.read_dir(path))


def _xplane(path: Path) -> Read:
    from analyzers.ingest import xprof

    return Read(*xprof.read_xplane(path))


def _xprof_json(path: Path) -> Read:
    from analyzers.ingest import xprof

    return Read(*xprof.read_json(path))


def _rocpd(path: Path) -> Read:
    from analyzers.ingest import rocpd

    return Read(*rocpd.read(path))


def _nsys_jax(path: Path) -> Read:
    from analyzers.ingest import nsys_jax

    return Read(*nsys_jax.read(path))


READERS = {
    r.kind: r
    for r in (
        Reader(tf.NSYS_SQLITE, t.SOURCE_NSYS, None, None),
        Reader(tf.NSYS_ARROW, t.SOURCE_NSYS, None, None),
        Reader(tf.NSYS_REP, t.SOURCE_NSYS, None, None),
        Reader(tf.KINETO, t.SOURCE_KINETO, None, _kineto),  # PyTorch's, or paddle's or MXNet's: by its rows
        Reader(tf.CUPTI, t.SOURCE_CUPTI, None, _cupti),
        Reader(tf.XPLANE, t.SOURCE_XPROF, None, _xplane),
        Reader(tf.XPROF_JSON, t.SOURCE_XPROF, None, _xprof_json),
        Reader(tf.ROCPD, t.SOURCE_ROCPD, None, _rocpd),
        Reader(tf.NSYS_JAX, t.SOURCE_NSYS_JAX, "jax", _nsys_jax),
    )
}
"""The formats, by kind: every kind of `tracer.core.trace_formats` has its one entry (a test holds it)."""


def reader_of(kind: str | None) -> Reader | None:
    return READERS.get(kind or "")
