"""Shared by the trace-backend tests: where the tools are, and a fake `cupti` binding for CPU-only machines."""

from __future__ import annotations

import enum
import os
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from tracer.core.errors import UserError
from tracer.environments import has_nvidia_gpu
from tracer.tracing.nsys import find_nsys


def require_nsys() -> Path:
    """nsys, or a skip saying how to get it; TRACER_REQUIRE_NSYS=1 (CI) turns its absence into a failure."""
    try:
        return find_nsys()
    except UserError as e:
        if os.environ.get("TRACER_REQUIRE_NSYS") == "1":
            pytest.fail(f"nsys must be installed for this test run (TRACER_REQUIRE_NSYS=1): {e}")
        pytest.skip(f"no nsys here: run scripts/install_nsys.sh ({e})")


def require_gpu() -> None:
    if not has_nvidia_gpu():
        pytest.skip("needs an NVIDIA GPU with CUDA; none here (run on the GPU machine, see ../shared/device/README.md)")


class FakeCupti:
    """Enough of `cupti.cupti` to drive the collector: records what was called, and hands buffers
    to the completion callback the way CUPTI does (from its own thread, or inside flush_all)."""

    class ActivityKind(enum.IntEnum):
        MEMCPY = 1
        MEMSET = 2
        KERNEL = 3
        DRIVER = 4
        RUNTIME = 5
        CONCURRENT_KERNEL = 10

    class ActivityThreadIdType(enum.IntEnum):
        DEFAULT = 0
        SYSTEM = 1

    class CallbackDomain(enum.IntEnum):
        DRIVER_API = 1
        RUNTIME_API = 2

    class runtime_api_trace_cbid(enum.IntEnum):  # noqa: N801 - the binding's name
        cudaMalloc_v3020 = 20
        cudaGetDevice_v3020 = 17
        cudaLaunchKernel_v7000 = 211

    class driver_api_trace_cbid(enum.IntEnum):  # noqa: N801
        cuCtxGetCurrent = 90
        cuLaunchKernel = 307

    CUPTI_NOW_NS = 5_000

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.pending: list[Any] = []
        self._completed: Callable[[list[Any]], None] | None = None

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith(("activity_", "set_")) or name == "finalize":
            return lambda *args: self.calls.append((name, *args))
        raise AttributeError(name)

    def activity_register_callbacks(self, requested: Callable[[], Any], completed: Callable[[list[Any]], None]) -> None:
        self.calls.append(("activity_register_callbacks",))
        assert requested()[0] > 0
        self._completed = completed

    def activity_flush_all(self, flag: int) -> None:
        self.calls.append(("activity_flush_all", flag))
        if self.pending:
            self.deliver(self.pending, in_thread=False)
            self.pending = []

    def get_timestamp(self) -> int:
        return self.CUPTI_NOW_NS

    def get_callback_name(self, domain: int, cbid: int) -> str:
        enum_cls = (
            self.driver_api_trace_cbid if domain == self.CallbackDomain.DRIVER_API else self.runtime_api_trace_cbid
        )
        return enum_cls(cbid).name

    def deliver(self, records: list[Any], in_thread: bool = True) -> None:
        assert self._completed is not None
        if not in_thread:
            self._completed(records)
            return
        t = threading.Thread(target=self._completed, args=(records,))
        t.start()
        t.join()


def api(kind: int, cbid: int, start: int, end: int, corr: int, tid: int = 77) -> SimpleNamespace:
    return SimpleNamespace(
        kind=kind, cbid=cbid, start=start, end=end, process_id=4242, thread_id=tid, correlation_id=corr
    )


def kernel(name: str, start: int, end: int, corr: int) -> SimpleNamespace:
    return SimpleNamespace(
        kind=int(FakeCupti.ActivityKind.CONCURRENT_KERNEL),
        name=name,
        start=start,
        end=end,
        device_id=0,
        stream_id=7,
        correlation_id=corr,
    )


def memcpy(copy_kind: int, start: int, end: int, corr: int, nbytes: int) -> SimpleNamespace:
    return SimpleNamespace(
        kind=int(FakeCupti.ActivityKind.MEMCPY),
        copy_kind=copy_kind,
        start=start,
        end=end,
        device_id=0,
        stream_id=7,
        correlation_id=corr,
        bytes=nbytes,
    )


def memset(start: int, end: int, corr: int, nbytes: int) -> SimpleNamespace:
    return SimpleNamespace(
        kind=int(FakeCupti.ActivityKind.MEMSET),
        start=start,
        end=end,
        device_id=0,
        stream_id=7,
        correlation_id=corr,
        bytes=nbytes,
    )
