"""The registry of trace formats (`analyzers.ingest.readers`): every kind the tool names has its one reader,
and the ingest reads each format through it (the tables of a real Kineto and a real nsys trace, and a
refusal for anything else)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from analyzers.ingest.import_run import ImportLabels, import_trace
from analyzers.ingest.pipeline import ingest_file, source_of, trace_kind
from analyzers.ingest.readers import (
    BYTES,
    READERS,
    Look,
    Read,
    Reader,
    by_name,
    file_kinds,
    readable,
    reader_of,
    register,
    stem,
)
from analyzers.run.run import Run
from analyzers.summaries.kernels import kernel_summary
from analyzers.trace import tables as t
from analyzers.trace.clock import kineto_clock
from tracer.core import trace_formats as tf
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder

KINDS = (*tf.NSYS_KINDS, tf.KINETO, tf.CUPTI, tf.ROCPD, tf.XPLANE, tf.XPROF_JSON, tf.NSYS_JAX)
"""The kinds `tracer.core.trace_formats` names, declared there apart from the registry."""


def test_every_kind_has_one_reader() -> None:
    assert set(READERS) == set(KINDS) and set(file_kinds()) == set(KINDS) - {tf.CUPTI}
    assert all(READERS[k].kind == k for k in READERS)
    assert [k for k in READERS if READERS[k].read is None] == list(tf.NSYS_KINDS)  # nsys alone is streamed


@pytest.mark.parametrize(
    ("rel", "source"),
    [("hta/triton_example.json.gz", t.SOURCE_KINETO), ("extra-p/con_kernel.sqlite", t.SOURCE_NSYS)],
)
def test_a_real_trace_is_read_by_its_formats_reader(real_fixtures: Path, tmp_path: Path, rel: str, source: str) -> None:
    path = real_fixtures / rel
    assert reader_of(trace_kind(path)) is READERS[trace_kind(path) or ""] and source_of(path) == source
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    written = ingest_file(path, folder)
    assert t.KERNELS in written and folder.table_path(t.KERNELS).exists()


def test_a_file_of_no_format_is_refused_in_one_line(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    assert reader_of(trace_kind(notes)) is None and source_of(notes) == "other"
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    with pytest.raises(UserError, match="not a trace this tracer reads"):
        ingest_file(notes, folder)


TOY_KERNELS = [(1_000, 250, "toy_gemm_kernel"), (2_000, 750, "toy_gemm_kernel"), (3_000, 100, "toy_relu_kernel")]
"""What the toy trace holds, and so what its import must show: (start ns, duration ns, kernel)."""


def sniff_toy(look: Look) -> str | None:
    return "a toy trace" if look.of == BYTES and look.head.startswith(b"TOY TRACE") else None


def read_toy(path: Path) -> Read:
    """A toy format, as a new format's module would read it: after its first line, one kernel per line
    (`start_ns dur_ns name`). It names no `source`: the registry stamps the format's own."""
    import pyarrow as pa

    rows = [line.split(maxsplit=2) for line in path.read_text(errors="replace").splitlines()[1:] if line.strip()]
    if not rows or any(len(r) != 3 or not (r[0].isdigit() and r[1].isdigit()) for r in rows):
        raise UserError(f"{path}: damaged toy trace (a line is not `start_ns dur_ns name`)")
    start, dur, names = [int(r[0]) for r in rows], [int(r[1]) for r in rows], [r[2] for r in rows]
    schema = pa.schema([f for f in t.KERNELS_SCHEMA if f.name != "source"])
    columns = {"start_ns": start, "end_ns": [s + d for s, d in zip(start, dur)], "dur_ns": dur, "name": names}
    columns |= {"short_name": names, "device": [0] * len(rows), "stream": [7] * len(rows)}
    table = pa.table({f.name: columns.get(f.name, [None] * len(rows)) for f in schema}, schema=schema)
    return Read({t.KERNELS: table}, kineto_clock(None))


@pytest.fixture
def toy_format() -> Iterator[None]:
    """The toy format added by its one registration line, the built-in registry restored afterwards."""
    built_in = dict(READERS)
    register(Reader("toy", "toy .toy", (".toy",), sniff_toy, read_toy))
    yield
    READERS.clear()
    READERS.update(built_in)


def test_a_format_is_its_module_and_one_registration(toy_format: None, tmp_path: Path) -> None:
    """A format registered with one line is sniffed, named, stemmed, said in the help texts and imported as a
    run whose kernels are the file's own, with no other module naming it (issue 51)."""
    toy = tmp_path / "run_1.2.toy"
    toy.write_text("TOY TRACE\n" + "".join(f"{s} {d} {n}\n" for s, d, n in TOY_KERNELS))
    assert trace_kind(toy) == "toy" and reader_of("toy") is READERS["toy"] and source_of(toy) == "toy"
    assert stem(toy.name) == "run_1.2" and "toy" in file_kinds() and "toy .toy" in readable()
    assert list(READERS)[0] == "toy"  # asked before the built-in formats
    run = Run.open(import_trace([toy], tmp_path / "runs", ImportLabels()).folder)
    assert run.record.workload.format == "toy"
    kernels = {k.name: (k.calls, k.total_ns) for k in kernel_summary(run)}
    assert kernels == {"toy_gemm_kernel": (2, 1_000), "toy_relu_kernel": (1, 100)}
    assert set(run.table(t.KERNELS, ["source"])["source"].to_pylist()) == {"toy"}
    damaged = tmp_path / "damaged.toy"
    damaged.write_bytes(b"TOY TRACE\nnot a kernel\n")  # its reader says what is wrong, in one line
    with pytest.raises(UserError, match="damaged toy trace"):
        import_trace([damaged], tmp_path / "runs2", ImportLabels())


def test_sniffing_asks_the_specific_format_first() -> None:
    """XProf's JSON is a Chrome-trace JSON too: the registry's order asks XProf first; a name that ends as both
    (`x.trace.json.gz`) is taken for the general one when the content says nothing."""
    kinds = list(READERS)
    assert kinds.index(tf.XPROF_JSON) < kinds.index(tf.KINETO) and kinds.index(tf.XPLANE) < kinds.index(tf.NSYS_ARROW)
    assert by_name("x.trace.json.gz") == tf.KINETO and by_name("x.rpd") == tf.ROCPD and by_name("x.zip") is None
