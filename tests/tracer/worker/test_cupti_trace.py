"""The in-worker CUPTI collector's own logic on the CPU: the bounded buffer pool, the raw writer and its
index, the stop-time walk, and the real libcupti's pure calls (no GPU, no fake CUPTI)."""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import pytest

from tests.tracer.measure.tracing.cupti_here import (
    VERSION,
    api,
    kernel,
    libcupti_path,
    memcpy,
    memset,
    next_record_offsets,
)
from tracer.core.schema import CUPTI_INDEX_FILE, CUPTI_LAYOUT, CUPTI_LIBRARY_ENV, CUPTI_META_FILE
from tracer.measure.environments import has_nvidia_gpu
from tracer.worker import cupti_trace
from tracer.worker.reporting import Reporter

L = CUPTI_LAYOUT
RT, DRV = L.KIND_RUNTIME, L.KIND_DRIVER


def test_the_pool_reuses_its_buffers_and_counts_when_it_runs_out() -> None:
    pool = cupti_trace.BufferPool(nbytes=4096, max_buffers=2)
    a, b = pool.take(), pool.take()
    assert a and b and a != b and a % 8 == 0 and b % 8 == 0
    assert pool.take() is None and pool.take() is None
    assert pool.exhausted == 2 and pool.allocated == 2 and pool.in_use == 2
    pool.give(a)
    pool.give(a)  # twice: still one free buffer
    pool.give(12345)  # not ours: ignored
    assert pool.in_use == 1
    assert pool.take() == a and pool.take() is None
    assert pool.allocated == 2 and pool.exhausted == 3


def test_the_writer_keeps_valid_bytes_as_they_are_and_indexes_each_buffer(tmp_path: Path) -> None:
    writer = cupti_trace.RawWriter(str(tmp_path))
    buf = (ctypes.c_uint8 * 64)(*range(64))
    writer.write(ctypes.addressof(buf), 40, 0, 0)
    writer.write(ctypes.addressof(buf), 0, 0, 0)  # an empty buffer with no drops: nothing to say
    writer.write(ctypes.addressof(buf), 0, 0, 5)  # drops without records: an index line, no file
    writer.write(ctypes.addressof(buf), 64, 3, 2)
    writer.close()
    assert (tmp_path / "buf-00000.bin").read_bytes() == bytes(range(40))
    assert (tmp_path / "buf-00001.bin").read_bytes() == bytes(range(64))
    lines = [json.loads(line) for line in (tmp_path / CUPTI_INDEX_FILE).read_text().splitlines()]
    assert [(d["file"], d["valid_bytes"], d["stream"], d["dropped"]) for d in lines] == [
        ("buf-00000.bin", 40, 0, 0),
        (None, 0, 0, 5),
        ("buf-00001.bin", 64, 3, 2),
    ]
    assert writer.dropped == 7 and writer.buffers == 2 and writer.bytes == 104
    assert not list(tmp_path.glob("*.tmp"))


def test_the_stop_walk_counts_kinds_and_finds_each_kernel_name_once() -> None:
    names = [ctypes.create_string_buffer(b"void gemm<float>(int)"), ctypes.create_string_buffer(b"relu_kernel")]
    ptrs = [ctypes.addressof(n) for n in names]
    data = (
        api(RT, 211, 100, 200, 1)
        + kernel(ptrs[0], 300, 400, 1)
        + api(DRV, 307, 110, 190, 1)
        + kernel(ptrs[1], 410, 420, 2)
        + kernel(ptrs[0], 430, 440, 3)
        + memcpy(1, 500, 600, 4, 4096)
        + memset(700, 800, 5, 64)
    )
    counts, pointers, error = cupti_trace.walk(data, L.layouts_for(VERSION))
    assert error is None
    assert counts == {RT: 1, DRV: 1, L.KIND_CONCURRENT_KERNEL: 3, L.KIND_MEMCPY: 1, L.KIND_MEMSET: 1}
    assert pointers == set(ptrs)
    assert cupti_trace.read_names(pointers) == {str(ptrs[0]): "void gemm<float>(int)", str(ptrs[1]): "relu_kernel"}
    assert cupti_trace.read_names({8, ptrs[1]}) == {str(ptrs[1]): "relu_kernel"}  # a misread pointer: skipped
    # a kind without a layout stops the walk there, with what came before kept
    counts, _, error = cupti_trace.walk(data[:40] + b"\x63" + bytes(39) + data[40:], L.layouts_for(VERSION))
    assert counts[RT] == 1 and sum(counts.values()) == 1 and error == "record kind 99 at byte 40: no layout"


def test_the_stop_walk_steps_as_cupti_itself_does() -> None:
    lib = libcupti_path()
    data = b"".join(
        [api(RT, 17, 1, 2, 1), kernel(0, 3, 4, 1), memcpy(2, 5, 6, 2, 8), memset(7, 8, 3, 4), api(DRV, 304, 9, 9, 4)]
        * 3
    )
    offsets, kinds = next_record_offsets(lib, data)
    counts, _, error = cupti_trace.walk(data, L.layouts_for(VERSION))
    assert error is None and len(offsets) == 15
    assert counts == {k: kinds.count(k) for k in set(kinds)}


def test_the_real_library_names_every_call_kineto_switches_off() -> None:
    lib = cupti_trace.Library(libcupti_path())
    assert L.major_of(lib.version()) >= 12
    runtime, driver = lib.callback_names(L.DOMAIN_RUNTIME), lib.callback_names(L.DOMAIN_DRIVER)
    assert set(cupti_trace.NOISY_RUNTIME) <= set(runtime.values())
    assert set(cupti_trace.NOISY_DRIVER) <= set(driver.values())
    assert "cudaLaunchKernel_v7000" in runtime.values() and "cuLaunchKernel" in driver.values()
    assert lib.timestamp() > 0
    assert lib.has("cuptiActivityEnableRuntimeApi") and not lib.has("cuptiNoSuchCall")


def test_a_library_that_cannot_load_is_one_clear_error() -> None:
    with pytest.raises(cupti_trace.CuptiError, match="cannot load /no/such/libcupti.so"):
        cupti_trace.Library("/no/such/libcupti.so")


def test_the_library_search_takes_the_override_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CUPTI_LIBRARY_ENV, "/opt/x/libcupti.so.13")
    assert cupti_trace.find_libcupti() == "/opt/x/libcupti.so.13"


def test_a_start_without_a_gpu_fails_cleanly_with_the_start_facts_written(tmp_path: Path) -> None:
    """The real libcupti on a machine without a GPU: start raises CUPTI's own error, nothing stays enabled,
    stop is then a no-op; the version and call-name tables were written before CUPTI was asked for a device."""
    if has_nvidia_gpu():
        pytest.skip("a GPU is here: the start succeeds (the GPU tests cover it)")
    reporter = Reporter(str(tmp_path / "events.jsonl"))
    collector = cupti_trace.CuptiCollector(str(tmp_path / "cupti"), reporter, library=libcupti_path())
    with pytest.raises(cupti_trace.CuptiError, match="cupti"):
        collector.start()
    collector.stop()
    reporter.close()
    meta = json.loads((tmp_path / "cupti" / CUPTI_META_FILE).read_text())
    assert meta["cupti_version"] == collector.version and meta["layouts_known"] is True
    assert meta["callback_names"]["runtime"]["17"] == "cudaGetDevice_v3020"
    assert (tmp_path / "events.jsonl").read_text() == ""


def test_the_buffer_callbacks_hand_out_pool_buffers_and_write_what_comes_back(tmp_path: Path) -> None:
    """The two callbacks CUPTI calls, called here as CUPTI would (through their C function pointers):
    a buffer from the pool, none when it is exhausted, and a completed buffer written as it is and returned."""
    pool = cupti_trace.BufferPool(nbytes=1024, max_buffers=1)
    collector = cupti_trace.CuptiCollector(str(tmp_path), None, library=libcupti_path(), pool=pool)
    collector.lib = lib = cupti_trace.Library(collector.library_path)
    collector.writer = cupti_trace.RawWriter(str(tmp_path))
    requested = lib.REQUESTED(collector._requested)
    completed = lib.COMPLETED(collector._completed)
    buf, size, most = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t(7)
    requested(ctypes.byref(buf), ctypes.byref(size), ctypes.byref(most))
    assert buf.value and size.value == 1024 and most.value == 0
    other = ctypes.c_void_p(1)
    requested(ctypes.byref(other), ctypes.byref(size), ctypes.byref(most))
    assert other.value is None and size.value == 0 and pool.exhausted == 1  # CUPTI drops and counts instead
    data = api(RT, 211, 1, 2, 1) + memset(3, 4, 2, 8)
    ctypes.memmove(buf.value, data, len(data))
    completed(None, 0, buf.value, 1024, len(data))
    collector.writer.close()
    assert (tmp_path / "buf-00000.bin").read_bytes() == data
    assert pool.in_use == 0
    (line,) = (tmp_path / CUPTI_INDEX_FILE).read_text().splitlines()
    assert json.loads(line)["valid_bytes"] == len(data) and json.loads(line)["dropped"] == 0
    assert collector.errors == []
