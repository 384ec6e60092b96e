"""What the CUPTI tests use: the real libcupti where one is installed (the PyTorch env's nvidia-cuda-cupti;
no GPU needed for its pure calls: version, callback names, timestamps, cuptiActivityGetNextRecord), the
recorded GPU data under tests/data/cupti/, and buffers laid out as the declared layouts say."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tracer.core.schema import CUPTI_LAYOUT, CUPTI_LIBRARY_ENV
from tracer.measure.tracing.cupti_decode import Layouts

L = CUPTI_LAYOUT
RECORDED = Path(__file__).resolve().parents[3] / "data" / "cupti"
VERSION = 130001


def libcupti_path() -> str:
    """A libcupti.so here, or a skip saying how to get one."""
    path = os.environ.get(CUPTI_LIBRARY_ENV)
    if path and Path(path).exists():
        return path
    from tracer.measure.environments import env_python

    python = Path(env_python("pytorch"))
    for site in sorted(python.parent.parent.glob("lib/python3*/site-packages")):
        for sub in ("nvidia/cu13/lib", "nvidia/cuda_cupti/lib"):
            found = sorted((site / sub).glob("libcupti.so*"))
            if found:
                return str(found[-1])
    pytest.skip(f"no libcupti here (the PyTorch env has no nvidia-cuda-cupti; or set {CUPTI_LIBRARY_ENV})")


def next_record_offsets(lib_path: str, data: bytes) -> tuple[list[int], list[int]]:
    """CUPTI's own walk of a buffer: the offset and kind of every record cuptiActivityGetNextRecord gives."""
    lib = ctypes.CDLL(lib_path)
    fn = lib.cuptiActivityGetNextRecord
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    fn.restype = ctypes.c_int
    buf = (ctypes.c_uint8 * max(len(data), 8)).from_buffer_copy(data.ljust(8, b"\0"))
    base = ctypes.addressof(buf)
    rec = ctypes.c_void_p(None)
    offsets, kinds = [], []
    while fn(base, len(data), ctypes.byref(rec)) == 0 and rec.value is not None:
        offsets.append(rec.value - base)
        kinds.append(ctypes.c_uint32.from_address(rec.value).value)
    return offsets, kinds


def record(kind: int, **fields: Any) -> bytes:
    """One record of `kind` as CUPTI 13 lays it out, with `fields` set and the rest zero."""
    dtype = Layouts.of(VERSION).dtypes[kind]
    rec = np.zeros(1, dtype)
    rec["kind"] = kind
    for name, value in fields.items():
        rec[name] = value
    return rec.tobytes()


def api(kind: int, cbid: int, start: int, end: int, corr: int, pid: int = 4242, tid: int = 77) -> bytes:
    return record(kind, cbid=cbid, start=start, end=end, process_id=pid, thread_id=tid, correlation_id=corr)


def kernel(name_ptr: int, start: int, end: int, corr: int, stream: int = 7) -> bytes:
    return record(
        L.KIND_CONCURRENT_KERNEL,
        name=name_ptr,
        start=start,
        end=end,
        correlation_id=corr,
        device_id=0,
        stream_id=stream,
        grid_x=2,
        block_x=128,
    )


def memcpy(copy_kind: int, start: int, end: int, corr: int, nbytes: int) -> bytes:
    return record(
        L.KIND_MEMCPY, copy_kind=copy_kind, start=start, end=end, correlation_id=corr, bytes=nbytes, stream_id=7
    )


def memset(start: int, end: int, corr: int, nbytes: int) -> bytes:
    return record(L.KIND_MEMSET, start=start, end=end, correlation_id=corr, bytes=nbytes, stream_id=7)
