"""The registry of trace formats (`analyzers.ingest.readers`): every kind the tool names has its one reader,
and the ingest reads each format through it (the tables of a real Kineto and a real nsys trace, and a
refusal for anything else)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.ingest.pipeline import ingest_file, source_of, trace_kind
from analyzers.ingest.readers import BYTES, FILE_KINDS, READERS, Look, Read, Reader, by_name, reader_of, stem
from analyzers.trace import tables as t
from tracer.core import trace_formats as tf
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder

KINDS = (*FILE_KINDS, tf.CUPTI)


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


def test_a_format_is_its_registration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A format registered in READERS is sniffed, named, stemmed and read through its entry alone: no suffix
    list or content test elsewhere names it (a toy format: a text file whose first line is `TOY TRACE`)."""

    def sniff_toy(look: Look) -> str | None:
        return "a toy trace" if look.of == BYTES and look.head.startswith(b"TOY TRACE") else None

    def read_toy(path: Path) -> Read:
        raise UserError(f"{path}: the toy reader was asked")

    monkeypatch.setitem(READERS, "toy", Reader("toy", "toy", None, read_toy, (".toy",), sniff_toy))
    toy = tmp_path / "run_1.2.toy"
    toy.write_text("TOY TRACE\n")
    assert trace_kind(toy) == "toy" and reader_of("toy") is READERS["toy"] and source_of(toy) == "toy"
    assert stem(toy.name) == "run_1.2"
    damaged = tmp_path / "damaged.toy"
    damaged.write_bytes(b"\x00\x01")  # named as one, content not: its reader says what is wrong
    assert trace_kind(damaged) == "toy"
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    with pytest.raises(UserError, match="the toy reader was asked"):
        ingest_file(toy, folder)


def test_sniffing_asks_the_specific_format_first() -> None:
    """XProf's JSON is a Chrome-trace JSON too: the registry's order asks XProf first; a name that ends as both
    (`x.trace.json.gz`) is taken for the general one when the content says nothing."""
    kinds = list(READERS)
    assert kinds.index(tf.XPROF_JSON) < kinds.index(tf.KINETO) and kinds.index(tf.XPLANE) < kinds.index(tf.NSYS_ARROW)
    assert by_name("x.trace.json.gz") == tf.KINETO and by_name("x.rpd") == tf.ROCPD and by_name("x.zip") is None
