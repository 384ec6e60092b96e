"""The registry of trace formats (`analyzers.ingest.readers`): every kind the tool names has its one reader,
and the ingest reads each format through it (the tables of a real Kineto and a real nsys trace, and a
refusal for anything else)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.ingest.pipeline import ingest_file, source_of, trace_kind
from analyzers.ingest.readers import READERS, reader_of
from analyzers.trace import tables as t
from tracer.core import trace_formats as tf
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder

KINDS = (*tf.FILE_KINDS, tf.CUPTI)


def test_every_kind_has_one_reader() -> None:
    assert set(READERS) == set(KINDS)
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
