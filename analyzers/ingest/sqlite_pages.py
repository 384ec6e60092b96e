"""Integer columns of one SQLite rowid table, read straight from the file's B-tree pages with numpy.

Why: Python's sqlite3 builds a tuple per row (about 0.3 M rows/s on our shared 2-core machines) and
SQLite's own VM is not much faster at decoding records, while an nsys export of a long run has tens of
millions of CUDA API rows of plain integers. This reader walks the table's interior pages in Python
(a few hundred for 10 M rows) and decodes every leaf cell at once with array gathers, following the
file format (https://www.sqlite.org/fileformat2.html): cell = payload-size varint, rowid varint,
record header (size varint, one serial type per column), values as big-endian integers.

It handles what integer tables hold (serial types 0-6, 8, 9; NULL returned as a mask; rows written
before an ALTER TABLE ADD COLUMN, whose missing columns read as NULL) and returns None for anything
else, so the caller falls back to sqlite3: a WAL file next to the database, WITHOUT ROWID tables,
overflowing payloads, floats, text or multi-byte serial types before or in a wanted column, an
INTEGER PRIMARY KEY among the wanted columns, or a page that does not parse. The file is only read.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

LEAF_TABLE = 0x0D
INTERIOR_TABLE = 0x05
# Bytes taken by each one-byte serial type: 0..11 by the table, from 12 on (type - 12) // 2 (blob, text).
_SIZE = np.array([0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0] + [(t - 12) // 2 for t in range(12, 256)], dtype=np.int64)
# Right shift that turns the 8 big-endian bytes at a value into the sign-extended integer.
_SHIFT = np.where(_SIZE > 0, 64 - 8 * _SIZE, 0).astype(np.int64)
_KEEP = np.where(_SIZE > 0, -1, 0).astype(np.int64)  # NULL and the constants 0 and 1 store no bytes
_CONST = np.array([1 if t == 9 else 0 for t in range(256)], dtype=np.int64)
_NOT_INT = np.array([t in (7, 10, 11) or t >= 12 for t in range(256)])  # float, reserved, blob, text


class _Unsupported(Exception):
    """A layout this reader leaves to sqlite3."""


def read_int_columns(
    con: sqlite3.Connection, path: Path, table: str, wanted: list[str]
) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    """{column: (int64 values in rowid order, bool NULL mask)}, or None when sqlite3 must do it.

    `con` is an open (read-only) connection to `path`, used for the schema only."""
    try:
        return _read(con, path, table, wanted)
    except (_Unsupported, IndexError, ValueError, OverflowError, sqlite3.Error):
        return None


def _read(
    con: sqlite3.Connection, path: Path, table: str, wanted: list[str]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    wal = Path(str(path) + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise _Unsupported("WAL")
    row = con.execute("SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    if row is None or not row[0] or "WITHOUT ROWID" in str(row[1]).upper():
        raise _Unsupported("table")
    root = int(row[0])
    info = con.execute(f'PRAGMA table_info("{table}")').fetchall()  # cid, name, type, notnull, default, pk
    index = {r[1]: r[0] for r in info}
    if any(c not in index for c in wanted):
        raise _Unsupported("column")
    pks = [r for r in info if r[5]]
    if len(pks) == 1 and str(pks[0][2]).upper() == "INTEGER" and pks[0][1] in wanted:
        raise _Unsupported("rowid alias")
    if any(info[index[c]][4] is not None for c in wanted):
        raise _Unsupported("default")  # a row older than the column would hold the default, not NULL

    size = path.stat().st_size
    buf = np.zeros(size + 16, dtype=np.uint8)  # 8-byte gathers may run past the end
    with path.open("rb") as f:
        if f.readinto(buf[:size].data) != size:
            raise _Unsupported("short read")
    if buf[:16].tobytes() != b"SQLite format 3\x00":
        raise _Unsupported("magic")
    page_size = int(buf[16]) << 8 | int(buf[17])
    page_size = 65536 if page_size == 1 else page_size
    usable = page_size - int(buf[20])
    le64 = np.ndarray((len(buf) - 8,), dtype=np.uint64, buffer=buf.data, strides=(1,))  # unaligned

    leaves = _leaf_pages(buf, root, page_size, size // page_size)
    if (leaves == 1).any():
        raise _Unsupported("page 1")
    base = (leaves - 1) * page_size
    ncells = _be16(buf, base + 3)
    total = int(ncells.sum())
    if total == 0:
        return {c: (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)) for c in wanted}
    cell = np.repeat(base + 8 - 2 * (np.cumsum(ncells) - ncells), ncells)
    cell += 2 * np.arange(total, dtype=np.int64)  # the cell pointer's position
    cell = np.repeat(base, ncells) + _be16(buf, cell)

    first = buf[cell]
    if (first >= 0x80).any():  # payload of 128 bytes or more: check it fits the page
        big = cell[first >= 0x80]
        if (_varint_value(buf, big) > usable - 35).any():
            raise _Unsupported("overflow")
        cell += _varint_len(le64, cell)
    else:
        cell += 1
    del first
    hdr = cell + _varint_len(le64, cell)  # past the rowid: the record header
    del cell
    hsize = buf[hdr]
    if (hsize >= 0x80).any():
        raise _Unsupported("long header")
    last = max(index[c] for c in wanted)
    short = hsize <= last + 1  # rows written before columns up to `last` were added
    offset = hdr + hsize
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for j in range(last + 1):
        st = buf[1 + j :][hdr]
        if short.any():
            st = np.where(hsize > j + 1, st, 0).astype(np.uint8)
        name = info[j][1]
        if name in wanted:
            if _NOT_INT[st].any():
                raise _Unsupported("non-integer value")
            values = le64[offset].byteswap().view(np.int64)
            values >>= _SHIFT[st]
            values &= _KEEP[st]
            values |= _CONST[st]
            out[name] = (values, st == 0)
        elif st.max() >= 0x80:
            raise _Unsupported("multi-byte serial type")
        if j < last:
            offset += _SIZE[st]
    return out


def _be16(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return buf[pos].astype(np.int64) << 8 | buf[pos + 1].astype(np.int64)


def _varint_len(le64: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Length in bytes (1..9) of the varint at each position."""
    word = le64[pos].byteswap()
    stops = ~word & np.uint64(0x8080808080808080)  # a clear top bit ends the varint
    _, exp = np.frexp(stops.astype(np.float64))  # highest stop bit = exp - 1; exact for these values
    return np.where(stops == 0, 9, (64 - exp) // 8 + 1).astype(np.int64)


def _varint_value(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    value = np.zeros(len(pos), dtype=np.int64)
    going = np.ones(len(pos), dtype=bool)
    for i in range(9):
        b = buf[pos + i].astype(np.int64)
        if i == 8:
            value = np.where(going, (value << 8) | b, value)
            break
        value = np.where(going, (value << 7) | (b & 0x7F), value)
        going &= b >= 0x80
        if not going.any():
            break
    return value


def _leaf_pages(buf: np.ndarray, root: int, page_size: int, npages: int) -> np.ndarray:
    """The table's leaf page numbers in key order, walking interior pages depth first."""
    leaves: list[np.ndarray] = []
    level = np.array([root], dtype=np.int64)
    for _depth in range(64):
        if (level < 1).any() or (level > npages).any():
            raise _Unsupported("page number")
        base = (level - 1) * page_size + np.where(level == 1, 100, 0)
        kinds = buf[base]
        if (kinds == LEAF_TABLE).all():
            leaves.append(level)
            return np.concatenate(leaves)
        if not (kinds == INTERIOR_TABLE).all():
            raise _Unsupported("mixed or unknown page types")  # B-tree leaves are all at one depth
        ncells = _be16(buf, base + 3)
        children: list[np.ndarray] = []
        heads = base - np.where(level == 1, 100, 0)
        for b, h, n in zip(base.tolist(), heads.tolist(), ncells.tolist()):
            ptrs = h + _be16(buf, b + 12 + 2 * np.arange(n, dtype=np.int64))
            left = _be32(buf, ptrs)
            right = _be32(buf, np.array([b + 8], dtype=np.int64))
            children.append(np.concatenate([left, right]))
        level = np.concatenate(children)
    raise _Unsupported("too deep")


def _be32(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return _be16(buf, pos) << 16 | _be16(buf, pos + 2)
