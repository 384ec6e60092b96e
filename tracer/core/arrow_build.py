"""Arrow arrays from Python lists, built from raw buffers.

Why: `pa.array(list)` and `pa.scalar` make pyarrow probe for pandas (so does `Schema.empty_table`:
`tables.empty` avoids it), and the
probe imports it: 0.2-0.4 s and 41 MiB of RSS in a process that never uses pandas (NumPy arrays are
probed too). The trace parsers build their tables from Python lists, and their peak memory is measured
against HolisticTraceAnalysis', so they build the arrays here from `array.array` and bytes buffers
instead (`Array.from_buffers` does not probe); so do the sample tables' readers (a column an older run
lacks, filled with its default), which every viewer open goes through. In `tracer.core` so that both can.
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from itertools import accumulate

import numpy as np
import pyarrow as pa

INT64 = pa.int64()
_INT_CODES = {INT64: "q", pa.int32(): "i", pa.int8(): "b"}


def ints(values: Sequence[int], type: pa.DataType = INT64) -> pa.Array:
    """Non-null integers (the parsers put a sentinel where a value is missing)."""
    return pa.Array.from_buffers(type, len(values), [None, pa.py_buffer(array.array(_INT_CODES[type], values))])


def strings(values: Sequence[str]) -> pa.Array:
    """Non-null strings (offsets are int32: one call holds far less than 2 GiB of text)."""
    encoded = [v.encode() for v in values]
    offsets = array.array("i", accumulate((len(b) for b in encoded), initial=0))
    return pa.Array.from_buffers(
        pa.string(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    )


def filled(value: int | str, n: int, type: pa.DataType) -> pa.Array:
    """`value` n times as `type` (a string, or one of the integer types above)."""
    if type == pa.string():
        return repeated(str(value), n)
    return ints([int(value)] * n, type)


def repeated(value: str, n: int) -> pa.Array:
    """`value` n times, as a plain string array."""
    indices = pa.Array.from_buffers(pa.int8(), n, [None, pa.py_buffer(bytes(n))])
    return pa.DictionaryArray.from_arrays(indices, strings([value])).cast(pa.string())


def column(values: Sequence[object], type: pa.DataType) -> pa.Array:
    """A list as an array of `type` (string or one of the integer types above)."""
    if type == pa.string():
        return strings(values)  # type: ignore[arg-type]
    return ints(values, type)  # type: ignore[arg-type]


def int_scalar(value: int) -> pa.Scalar:
    """An int64 scalar for compute calls (a bare Python int there is converted with the probe)."""
    return ints([value])[0]


def float_scalar(value: float) -> pa.Scalar:
    """A float64 scalar for compute calls (a bare Python float there is converted with the probe)."""
    return pa.Array.from_buffers(pa.float64(), 1, [None, pa.py_buffer(array.array("d", [value]))])[0]


def indices(values: np.ndarray) -> pa.Array:
    """NumPy row numbers as an int64 array for `take` (a NumPy array there is converted with the probe)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(INT64, len(values), [None, pa.py_buffer(values)])


def string_scalar(value: str) -> pa.Scalar:
    """A string scalar for compute calls (a bare Python str there is converted with the probe)."""
    return strings([value])[0]
