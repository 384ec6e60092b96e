"""The chunked traceEvents reader against `json.loads` of the same bytes: cuts that land in nested
values and strings, header keys on both sides of the array, and broken files."""

from __future__ import annotations

import gzip
import io
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from analyzers.ingest import trace_events
from analyzers.ingest.trace_events import TraceEvents, TraceFormatError


def _read(data: bytes) -> tuple[list[trace_events.Event], dict]:
    reader = TraceEvents(io.BytesIO(data))
    events = [ev for chunk in reader for ev in chunk]
    return events, reader.header


@pytest.fixture
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cuts every few events and reads a few bytes at a time, so every path is taken on small files."""
    monkeypatch.setattr(trace_events, "CHUNK_BYTES", 300)
    monkeypatch.setattr(trace_events, "READ_BYTES", 97)


def _doc(events: list[dict], **header: object) -> dict:
    return {"schemaVersion": 1, "traceEvents": events, **header}


TRICKY = [
    {"ph": "X", "cat": "cpu_op", "name": 'a "}, {" in a name', "pid": 1, "tid": 2, "ts": 1.5, "dur": 2.25},
    {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 1,
        "tid": 7,
        "ts": 4544699557751.704,
        "dur": 3,
        "args": {"nested": [{"a": 1}, {"b": [{"c": "}]"}, {}]}], "grid": [1, 2, 3], "correlation": 9},
    },
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": "stream 7", "args": {"name": "}, {"}},
] * 40


@pytest.mark.parametrize("indent", [None, 2])
def test_events_and_header_match_json_loads(tiny_chunks: None, indent: int | None) -> None:
    doc = {"traceEvents": TRICKY, "baseTimeNanoseconds": 1790857026000000000, "traceName": "x.json"}
    data = json.dumps({"meta": {"traceEvents": [1]}, **doc}, indent=indent).encode()  # a nested key first
    events, header = _read(data)
    expected = json.loads(data)
    assert [ev.name for ev in events] == [e["name"] for e in expected["traceEvents"]]
    assert [ev.tid for ev in events] == [e["tid"] for e in expected["traceEvents"]]
    assert str(events[1].ts) == "4544699557751.704"  # exact, not a float's neighbour
    assert events[1].args is not None and events[1].args.grid == [1, 2, 3] and events[1].args.correlation == 9
    assert header == {k: v for k, v in expected.items() if k != "traceEvents"}


def test_a_kineto_fixture_reads_as_json_loads_does(tiny_chunks: None, real_fixtures: Path) -> None:
    data = gzip.decompress((real_fixtures / "kineto-h100/resnet50_bs100_train_torch2.11.json.gz").read_bytes())
    events, header = _read(data)
    expected = json.loads(data)
    assert len(events) == len(expected["traceEvents"]) > 1000
    assert [(ev.ph, ev.cat, ev.name) for ev in events] == [
        (e.get("ph"), e.get("cat"), e.get("name", "")) for e in expected["traceEvents"]
    ]
    assert header["baseTimeNanoseconds"] == expected["baseTimeNanoseconds"]


def test_an_empty_array_has_no_events_but_a_header() -> None:
    events, header = _read(b'{"a": 1, "traceEvents": [ ], "baseTimeNanoseconds": 5}')
    assert events == [] and header == {"a": 1, "baseTimeNanoseconds": 5}


@pytest.mark.parametrize("tail", [b"]", b"", b",\n", b"\n]\n"])
def test_a_bare_array_of_events_is_a_trace(tiny_chunks: None, tail: bytes) -> None:
    """Chrome's JSON Array Format: no object, no header, and the closing `]` may be left out."""
    body = json.dumps(TRICKY).encode()[:-1]
    events, header = _read(body + tail)
    assert [(e.ph, e.name) for e in events] == [(e.get("ph"), e.get("name", "")) for e in TRICKY]
    assert header == {}


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (json.dumps(_doc(TRICKY)).encode()[:-900], "does not close"),
        (json.dumps(_doc(TRICKY)).encode().replace(b'"pid": 1, "tid": 7', b'"pid": 1 "tid": 7', 1), "not valid JSON"),
        (b'{"name": "package.json", "version": "1.0"}', "no traceEvents"),
        (b'[{"ph": "X"}, {"ph": "X", "na', "ends inside an event"),
        (b'[{"ph": "X"}] trailing', "after the events array"),
        (json.dumps(_doc([{"ph": "X", "ts": True}])).encode(), "unexpected type"),
        (json.dumps(_doc(TRICKY[:3])).encode() + b" trailing", "after traceEvents"),
    ],
)
def test_broken_files_say_what_is_wrong(tiny_chunks: None, data: bytes, says: str) -> None:
    with pytest.raises(TraceFormatError, match=says):
        _read(data)


def test_a_long_nested_array_is_cut_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `}, {` inside one event's long array is a wrong cut; tries double in distance, so a
    200 k-object array costs a few dozen decodes, not 200 k."""
    monkeypatch.setattr(trace_events, "CHUNK_BYTES", 64)
    calls = []
    real = trace_events.decode_piece
    monkeypatch.setattr(trace_events, "decode_piece", lambda piece: calls.append(len(piece)) or real(piece))
    big = {"ph": "X", "name": "big", "ts": 1, "dur": 1, "args": {"list": [{"i": i} for i in range(200_000)]}}
    events, _ = _read(json.dumps(_doc([big, {"ph": "X", "name": "after", "ts": 2}])).encode())
    assert [ev.name for ev in events] == ["big", "after"]
    assert len(calls) < 40, len(calls)


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("depth", [1, 3])
def test_pieces_decoded_in_a_pool_come_out_the_same(tiny_chunks: None, indent: int | None, depth: int) -> None:
    """Cuts inside nested values and strings are taken as right in the pool until their decode says
    otherwise; the pieces cut after one are dropped and cut again: the same events, in order."""
    doc = {"traceEvents": TRICKY, "baseTimeNanoseconds": 5, "traceName": "x.json"}
    data = json.dumps(doc, indent=indent).encode()
    wrong = []

    def decode(piece: bytes) -> list[trace_events.Event] | None:
        events = trace_events.decode_piece(piece)
        wrong.append(events is None)
        return events

    with ThreadPoolExecutor(2) as pool:
        reader = TraceEvents(io.BytesIO(data), decode, pool=pool, depth=depth)
        pieces = list(reader)
    expected, header = _read(data)
    assert [ev for piece in pieces for ev in piece] == expected
    assert reader.header == header == {"baseTimeNanoseconds": 5, "traceName": "x.json"}
    assert any(wrong) and not all(wrong)  # some cuts were wrong, and were cut again


def test_a_broken_file_says_the_same_with_a_pool(tiny_chunks: None) -> None:
    data = json.dumps(_doc(TRICKY)).encode().replace(b'"pid": 1, "tid": 7', b'"pid": 1 "tid": 7', 1)
    with ThreadPoolExecutor(2) as pool, pytest.raises(TraceFormatError, match="not valid JSON"):
        list(TraceEvents(io.BytesIO(data), pool=pool))
