"""Arrow columns as numpy arrays without pandas: pyarrow's own `to_numpy` on a chunked column imports
pandas (0.4 s of CPU), and the lanes and the viewer read millions of rows. Numbers are viewed in place
(a memory-mapped file stays mapped) where the dtype already matches."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracer.core import arrow_build

NAN = arrow_build.float_scalar(math.nan)  # not a bare float: pyarrow would probe for (and import) pandas

_NUMPY_OF = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint8(): np.uint8,
    pa.uint16(): np.uint16,
    pa.uint32(): np.uint32,
    pa.uint64(): np.uint64,
    pa.float32(): np.float32,
    pa.float64(): np.float64,
}


def one_chunk(column: pa.ChunkedArray) -> pa.Array:
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks() if column.num_chunks else pa.array([], type=column.type)


def as_array(column: pa.ChunkedArray, dtype: type) -> np.ndarray:
    """A column as numpy; nulls become NaN."""
    if column.null_count:
        column = pc.fill_null(column.cast(pa.float64()), NAN)
    arr = one_chunk(column)
    kind = _NUMPY_OF.get(arr.type)
    if kind is None:
        return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=dtype)
    view = np.frombuffer(arr.buffers()[1], dtype=kind, count=len(arr), offset=arr.offset * np.dtype(kind).itemsize)
    return view if view.dtype == dtype else view.astype(dtype)


def dictionary(column: pa.ChunkedArray) -> pa.DictionaryArray:
    """A string column as one dictionary array (read dictionary-encoded already, or encoded here)."""
    if pa.types.is_dictionary(column.type) and column.num_chunks > 1:
        column = column.unify_dictionaries()
    arr = one_chunk(column)
    return arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)


def codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Each row's string as an index into the returned list of distinct strings (nulls as "")."""
    text = dictionary(column)
    words = ["" if w is None else str(w) for w in text.dictionary.to_pylist()]
    indices = text.indices
    if indices.null_count:
        indices = pc.fill_null(indices, pa.scalar(len(words), indices.type))
        words.append("")
    return as_array(pa.chunked_array([indices]), np.int64), words
