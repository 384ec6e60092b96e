"""A Chrome-trace JSON object's `traceEvents`, or a bare array of events (the Chrome trace format's
"JSON Array Format", whose closing `]` may be missing), decoded in bounded chunks with msgspec.

Why chunks: msgspec decodes typed events several times faster than a streaming tokenizer (ijson
spent 3.6 s handing over the 784 k events of the benchmark trace; msgspec decodes them in about 1 s),
but only whole documents. So the events array is cut at `}` `,` `{` boundaries about `CHUNK_BYTES`
apart and each piece is decoded as its own array: memory stays flat in the length of the trace.

Why the cut is safe: a piece runs from one top-level event's `{` to a candidate `}`. If the candidate
is inside a nested value or a string, `[` + piece + `]` is unbalanced and msgspec says so at its last
byte (or "truncated"), and the next candidate is tried; any other decode error is the file's own.
Skipping a true boundary is harmless (the piece just holds more events), so after a wrong cut the
next try is twice as far in. The header fields around the array (`baseTimeNanoseconds`, before or
after it) are decoded as JSON too, so nothing is searched for in strings.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Executor, Future
from decimal import Decimal
from typing import IO, Any

import msgspec
import pyarrow as pa
import pyarrow.json as pa_json

CHUNK_BYTES = 1 << 20
"""Roughly the bytes decoded at once (one piece of the events array)."""
READ_BYTES = 1 << 20
MAX_HEAD_BYTES = 64 << 20
"""How far into the file `traceEvents` must start (Kineto writes a header of a few hundred bytes)."""
MAX_EVENT_BYTES = 32 << 20
"""A piece that will not close within this many bytes is not a trace we can read in bounded memory."""
MAX_NAME_CHARS = 1 << 16
"""A name (an operator's, a kernel's) kept past this many characters is cut, marked with its length: ten
events just under MAX_EVENT_BYTES, each a 30 MiB name, held 1.5 GB at import; C++ kernel names run to a
few thousand characters."""


def bounded_name(name: str) -> str:
    """`name`, or its first MAX_NAME_CHARS characters and how long it was."""
    if len(name) <= MAX_NAME_CHARS:
        return name
    return f"{name[:MAX_NAME_CHARS]}... (cut: {len(name):,} characters)"


_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BETWEEN = re.compile(rb"\}\s*,\s*\{")
_LAST = re.compile(rb"\}\s*\]")
_AT_BYTE = re.compile(r"\(byte (\d+)\)")
UTF8_BOM = b"\xef\xbb\xbf"


class Args(msgspec.Struct):
    """The `args` fields the tables use; the rest are skipped unparsed."""

    correlation: Any = None
    device: Any = None
    stream: Any = None
    bytes: Any = None
    grid: Any = None
    block: Any = None
    input_dims: Any = msgspec.field(default=None, name="Input Dims")
    input_type: Any = msgspec.field(default=None, name="Input type")  # a collective's payload: its element types
    in_msg_nelems: Any = msgspec.field(default=None, name="In msg nelems")  # PyTorch's record_param_comms (2.1+)
    dtype: Any = None  # ... and its element type (`Float`, `BFloat16`)
    external_id: Any = msgspec.field(default=None, name="External id")  # Kineto: an op's number, in creation order
    external_id_2021: Any = msgspec.field(default=None, name="external id")
    name: Any = None  # a metadata event's process or thread name
    hlo_op: Any = None  # XProf: the XLA op an event ran (jax.profiler, TensorFlow's profiler)
    hlo_module: Any = None
    long_name: Any = None  # XProf: a TensorFlow op's `name:type`


class Event(msgspec.Struct):
    """One trace event. Times are Decimal so that µs with 3 decimals become exact ns."""

    ph: Any = None
    cat: Any = None
    name: Any = ""
    pid: Any = None
    tid: Any = None
    ts: Decimal | None = None
    dur: Decimal | None = None
    args: Args | None = None


class TraceFormatError(ValueError):
    """The file is not a Chrome-trace JSON object: malformed, truncated, or without `traceEvents`."""


_EVENTS = msgspec.json.Decoder(list[Event])
_ANY = msgspec.json.Decoder()


class TraceEvents:
    """Iterate to get lists of `Event` (or what `decode` makes of each piece); afterwards `header` holds
    the object's other top-level keys.

    With a `pool`, the pieces between the first and the last are decoded there, up to `depth` at once,
    each cut taken as right until its decode says otherwise (None: a wrong cut). Then every piece cut
    after it is dropped and the bytes are cut again from that piece on, twice as far in, as without a
    pool: the pieces come out in order and the same."""

    def __init__(
        self,
        f: IO[bytes],
        decode: Callable[[bytes], Any] | None = None,
        chunk_bytes: int = 0,
        pool: Executor | None = None,
        depth: int = 2,
    ) -> None:
        self.f = f
        self.decode = decode
        """A piece's bytes (`{...}, ..., {...}`) to what the iterator yields, None for a wrong cut; else
        `decode_piece`."""
        self.chunk_bytes = chunk_bytes
        """The bytes decoded at once; else `CHUNK_BYTES`."""
        self.pool = pool
        self.depth = depth
        self.header: dict[str, Any] = {}
        self.eof = False
        self.bare = False  # a bare array of events: no header, and the closing `]` is optional

    def _more(self, buf: bytes) -> bytes:
        data = self.f.read(max(READ_BYTES, self.chunk_bytes))  # a piece in one read: `buf + data` copies
        if not data:
            self.eof = True
        return buf + data

    def _decode(self, piece: bytes) -> Any:
        return (self.decode or decode_piece)(piece)

    def __iter__(self) -> Iterator[Any]:
        buf = self._find_events()
        if buf is None:
            return
        search_from = 0
        chunk = self.chunk_bytes or CHUNK_BYTES
        pending: deque[tuple[bytes, bytes, Future[Any]]] = deque()  # (piece, bytes after it, its decode)
        while True:
            m = _BETWEEN.search(buf, max(search_from, min(chunk, len(buf))))
            if m is None:
                if self.eof:
                    if not pending:
                        break
                    back = yield from self._confirm(pending, len(pending))
                    if back is not None:
                        buf, search_from = back[0] + buf, back[1]
                    continue
                if len(buf) > MAX_EVENT_BYTES:
                    raise TraceFormatError(f"an event runs over {MAX_EVENT_BYTES >> 20} MiB")
                search_from = max(0, len(buf) - 64)
                buf = self._more(buf)
                continue
            if self.pool is not None:
                piece = buf[: m.start() + 1]
                pending.append((piece, buf[m.start() + 1 : m.end() - 1], self.pool.submit(self._decode, piece)))
                buf = buf[m.end() - 1 :]
                search_from = 0
                held = sum(len(p) for p, _, _ in pending)  # big events: one at a time, not `depth` of them
                if len(pending) > self.depth or (len(pending) > 1 and held > MAX_EVENT_BYTES):
                    back = yield from self._confirm(pending, 1)
                    if back is not None:
                        buf, search_from = back[0] + buf, back[1]
                continue
            events = self._decode(buf[: m.start() + 1])
            if events is None:  # the cut was inside a nested value: try one twice as far, so that a
                search_from = 2 * m.end()  # long nested array costs linear time, not quadratic
                continue
            yield events
            buf = buf[m.end() - 1 :]
            search_from = 0
        yield from self._last(buf)

    @staticmethod
    def _confirm(
        pending: deque[tuple[bytes, bytes, Future[Any]]], n: int
    ) -> Generator[Any, None, tuple[bytes, int] | None]:
        """Yields the decodes of the `n` oldest pending pieces, in order. At a wrong cut, drops every pending
        piece and returns their bytes (to go before the buffer) and where to cut them next."""
        for _ in range(n):
            piece, between, future = pending[0]
            events = future.result()
            if events is None:
                back = b"".join(p + b for p, b, _ in pending)
                for _, _, dropped in pending:
                    dropped.cancel()
                pending.clear()
                return back, 2 * (len(piece) + len(between) + 1)
            pending.popleft()
            yield events
        return None

    def _find_events(self) -> bytes | None:
        """Reads until `"traceEvents": [` at the top level; the bytes after `[`, or None if the array is empty."""
        buf = b""
        while not buf.lstrip() and not self.eof:
            buf = self._more(buf)
        buf = buf.removeprefix(UTF8_BOM)  # editors on Windows save JSON with one; JSON parsers refuse it
        if buf.lstrip().startswith(b"["):
            self.bare = True
            rest = buf.lstrip()[1:].lstrip()
            while not rest and not self.eof:
                rest = self._more(rest).lstrip()
            return None if rest.startswith(b"]") or not rest else rest
        search_from = 0
        while True:
            m = _EVENTS_KEY.search(buf, search_from)
            if m is not None:
                try:
                    self.header = _ANY.decode(buf[: m.end()] + b"]}")
                except msgspec.DecodeError:  # the key was inside a string or a nested value
                    search_from = m.end()
                    continue
                if not isinstance(self.header, dict):
                    raise TraceFormatError("not a JSON object")
                self.header.pop("traceEvents", None)
                rest = buf[m.end() :].lstrip()
                while not rest and not self.eof:
                    rest = self._more(rest).lstrip()
                if rest.startswith(b"]"):
                    self._tail(rest[1:])
                    return None
                return rest
            if self.eof:
                raise TraceFormatError("no traceEvents")
            if len(buf) > MAX_HEAD_BYTES:
                raise TraceFormatError(f"no traceEvents in the first {MAX_HEAD_BYTES >> 20} MiB")
            search_from = max(0, len(buf) - 64)
            buf = self._more(buf)

    def _last(self, buf: bytes) -> Iterator[Any]:
        """The events after the last cut: up to the array's closing `]`, then the header's tail."""
        search_from = 0
        while True:
            m = _LAST.search(buf, search_from)
            if m is None and self.bare:
                yield from self._unclosed(buf)
                return
            if m is None:
                raise TraceFormatError(_unclosed_why(buf))
            events = self._decode(buf[: m.start() + 1])
            if events is None:
                search_from = m.end()
                continue
            yield events
            self._tail(buf[m.end() :])
            return

    def _unclosed(self, buf: bytes) -> Iterator[Any]:
        """A bare array may end after its last event, with or without a comma: no `]`."""
        piece = buf.rstrip().rstrip(b",").rstrip()
        events = self._decode(piece) if piece.endswith(b"}") else None
        if events is None:
            raise TraceFormatError("the events array ends inside an event (truncated?)")
        yield events

    def _tail(self, rest: bytes) -> None:
        """The top-level keys after the array (`, "key": value ... }`); nothing after a bare array."""
        if self.bare:
            if rest.strip():
                raise TraceFormatError("text after the events array")
            return
        try:
            tail = _ANY.decode(b'{"traceEvents":[]' + rest)
        except msgspec.DecodeError as e:
            raise TraceFormatError(f"after traceEvents: {e}") from None
        tail.pop("traceEvents", None)
        self.header.update(tail)


NOT_OBJECTS = "the traceEvents array holds an element that is not an event (a JSON object): a number, text or list"


def _unclosed_why(buf: bytes, tries: int = 64) -> str:
    """Why no `}]` ends the array: an element that is no object closes it (the file's end then reads as a
    header's tail after some `]`), else the file was cut short."""
    end = len(buf)
    for _ in range(tries):
        end = buf.rfind(b"]", 0, end)
        if end < 0:
            break
        try:
            _ANY.decode(b'{"traceEvents":[]' + buf[end + 1 :])
        except msgspec.DecodeError:
            continue
        return NOT_OBJECTS
    return "the traceEvents array does not close (truncated?)"


def decode_piece(piece: bytes) -> list[Event] | None:
    """The events of `{...}, ..., {...}`; None when the piece ends inside a value (a wrong cut)."""
    doc = b"[" + piece + b"]"
    try:
        return _EVENTS.decode(doc)
    except msgspec.ValidationError as e:
        raise TraceFormatError(f"an event field has an unexpected type ({e})") from None
    except RecursionError:
        raise TraceFormatError("an event's values are nested too deeply to read") from None
    except msgspec.DecodeError as e:
        at = _AT_BYTE.search(str(e))
        if "truncated" in str(e) or (at is not None and int(at.group(1)) == len(doc) - 1):
            return None
        raise TraceFormatError(f"not valid JSON ({e})") from None


_TEXT_ID = re.compile(rb'"([pt]id)"(\s*:\s*")')
TEXT_ID = "\u0001"
"""Suffix of the key a string-valued `pid` or `tid` is renamed to before the Arrow reader sees it."""
PID_TEXT, TID_TEXT = "pid" + TEXT_ID, "tid" + TEXT_ID
TIME = pa.decimal128(38, 3)
"""µs as the trace writes them: the unscaled value is exact integer ns (more decimals: the reader refuses)."""
_INT = pa.int64()
ARROW_ARGS = pa.struct(
    [
        ("correlation", _INT),
        ("device", _INT),
        ("stream", _INT),
        ("bytes", _INT),
        ("grid", pa.list_(_INT)),
        ("block", pa.list_(_INT)),
        ("External id", _INT),
        ("external id", _INT),
    ]
)
ARROW_EVENT = pa.struct(
    [
        ("ph", pa.string()),
        ("cat", pa.string()),
        ("name", pa.string()),
        ("pid", _INT),
        ("tid", _INT),
        (PID_TEXT, pa.string()),
        (TID_TEXT, pa.string()),
        ("ts", TIME),
        ("dur", TIME),
        ("args", ARROW_ARGS),
    ]
)
"""The fields of `Event` and `Args` the Kineto tables use, one type each; any other field is skipped."""
_ARROW_OPTIONS = pa_json.ParseOptions(
    explicit_schema=pa.schema([("e", pa.list_(ARROW_EVENT))]),
    newlines_in_values=True,
    unexpected_field_behavior="ignore",
)


def arrow_piece(piece: bytes) -> pa.StructArray | None:
    """The events of `{...}, ..., {...}` as one Arrow struct array (`ARROW_EVENT`) read by pyarrow's C++
    JSON reader, no Python object per event; None where it refuses the piece (a field of another type
    than declared, a number past int64, a time with more than 3 decimals, a wrong cut): the caller then
    decodes it with `decode_piece`, which reads anything and says what is wrong.

    A `pid` or `tid` is a number or a string (Kineto's "Spans"); where a piece has a string one, the
    reader refuses it and it is read again with each string one's key renamed to `PID_TEXT` or
    `TID_TEXT` (searching every piece first would cost more: a trace has a few). The match cannot be
    inside a string: a quote there is escaped."""
    try:
        events = _read_arrow(piece)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if _TEXT_ID.search(piece) is None:
            return None
        try:
            events = _read_arrow(_TEXT_ID.sub(rb'"\1\\u0001"\2', piece))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    if events.num_chunks != 1 or events.null_count:
        return None
    values = events.chunk(0).values
    return values if values.null_count == 0 else None


def _read_arrow(piece: bytes) -> pa.ChunkedArray:
    doc = b'{"e":[' + piece + b"]}"  # one row: the piece's events as a list (no cut to make between them)
    read = pa_json.ReadOptions(use_threads=False, block_size=len(doc) + 1)
    # malloc's pool: these arrays live for one piece, and malloc gives their memory back when they go
    pool = pa.system_memory_pool()
    return pa_json.read_json(pa.py_buffer(doc), read_options=read, parse_options=_ARROW_OPTIONS, memory_pool=pool)["e"]
