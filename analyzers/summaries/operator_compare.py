"""Each run's top framework operators by self time, per image, so that runs of different frameworks
traced with their own profilers (`--trace native`: aten::convolution_backward beside
_MklNativeFusedConv2D beside XLA's fusion.12) can be read side by side.

Per image: the operators' self time over the images the trace saw (the epochs inside the trace window,
the whole run without one); a run whose traced images are not known shows self time only. Operator
names are each framework's own: no row matches one framework's operator to another's.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzers.run.run import Run
from analyzers.summaries.operators import operator_summary
from analyzers.trace import tables as t

TOP_OPERATORS = 5
SOURCE_NAMES = {
    t.SOURCE_KINETO: "PyTorch profiler",
    t.SOURCE_XPROF: "XProf (XPlane)",
    t.SOURCE_NSYS_JAX: "nsys-jax",
    t.SOURCE_PADDLE: "paddle.profiler",
    t.SOURCE_MXNET: "MXNet's profiler",
}
"""How the operator table's source is named where it is shown."""


@dataclass(frozen=True)
class TopOperator:
    name: str
    self_ns: int
    self_pct: float
    self_ns_per_image: float | None  # None: the images the trace saw are not known


def images_traced(folder: Run) -> int | None:
    """Images of the epochs the trace saw: those inside the trace window, else all of the run's."""
    from analyzers.trace.trace_window import window_span

    epochs = folder.epochs()
    if not epochs:
        return None
    span = window_span(folder)
    if span is None:
        return sum(e.images for e in epochs) or None
    inside = [e for e in epochs if e.start_ns >= span.start_ns and e.end_ns <= span.end_ns]
    return sum(e.images for e in inside) or None


def top_operators(folder: Run, top: int = TOP_OPERATORS) -> list[TopOperator]:
    """The `top` operators by self time over the whole trace, with self time per traced image."""
    rows = operator_summary(folder)[:top]
    images = images_traced(folder) if rows else None
    return [TopOperator(r.name, r.self_ns, r.self_pct, r.self_ns / images if images else None) for r in rows]


def operator_source(folder: Run) -> str:
    """Whose profiler the operator table came from, in words ('' without one)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = folder.table_file(t.OPERATORS)
    if not t.present(folder, t.OPERATORS):  # absent, or damaged (named in the run's problems)
        return ""
    sources = pc.unique(pq.read_table(path, columns=["source"])["source"]).to_pylist()
    return ", ".join(SOURCE_NAMES.get(s, s) for s in sources)
