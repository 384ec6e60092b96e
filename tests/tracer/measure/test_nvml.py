"""NVML's reasons told apart with pynvml's own error types: on this machine (no NVIDIA driver) its real
`nvmlInit` fails as it does on any CPU-only host; a GPU's answers are pynvml's errors raised by a session
over the real module with the device calls replaced (the one thing that needs a GPU to happen)."""

from __future__ import annotations

import types
from typing import Any

import pynvml
import pytest

from tracer.core import schema
from tracer.measure.nvml import GPU_LOST, MISSING, NOT_SUPPORTED, Nvml, reason


def test_no_driver_here_is_driver_or_library_missing() -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        expected = e
    else:  # pragma: no cover - a machine with a driver
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver: NVML opens")
    assert isinstance(expected, (pynvml.NVMLError_LibraryNotFound, pynvml.NVMLError_DriverNotLoaded))
    nvml, status = Nvml.open()
    assert nvml is None
    assert status == f"not available ({MISSING}: {type(expected).__name__})"


def test_each_nvml_error_has_its_reason_and_a_bug_has_none() -> None:
    cases = {
        pynvml.NVML_ERROR_NOT_SUPPORTED: NOT_SUPPORTED,
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND: NOT_SUPPORTED,
        pynvml.NVML_ERROR_GPU_IS_LOST: GPU_LOST,
        pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: MISSING,
        pynvml.NVML_ERROR_DRIVER_NOT_LOADED: MISSING,
    }
    for code, words in cases.items():
        error = pynvml.NVMLError(code)  # pynvml gives the subclass of the code (NVMLError_GpuIsLost, ...)
        assert type(error) is not pynvml.NVMLError
        assert reason(pynvml, error) == words
    assert reason(pynvml, pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)).startswith("NVML error: ")  # type: ignore[union-attr]
    assert reason(pynvml, TypeError("a bug")) is None


def _raise(code: int) -> Any:
    def call(*args: object) -> Any:
        raise pynvml.NVMLError(code)

    return call


def _gpu(**calls: Any) -> types.SimpleNamespace:
    """pynvml itself (its error classes, constants) with one device whose calls answer as given."""
    module = types.SimpleNamespace(**vars(pynvml))
    module.nvmlInit = lambda: None
    module.nvmlDeviceGetCount = lambda: 1
    module.nvmlDeviceGetHandleByIndex = lambda i: object()
    utilization = types.SimpleNamespace(gpu=50, memory=20)
    memory = types.SimpleNamespace(used=2**30, total=2**34)
    answers = {
        "nvmlDeviceGetUtilizationRates": lambda h: utilization,
        "nvmlDeviceGetMemoryInfo": lambda h: memory,
        "nvmlDeviceGetPowerUsage": lambda h: 70_000,
        "nvmlDeviceGetTotalEnergyConsumption": lambda h: 1_000,
        "nvmlDeviceGetTemperature": lambda h, sensor: 40,
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [],
    }
    for name, fn in (answers | calls).items():
        setattr(module, name, fn)
    return module


def test_a_reading_records_why_each_field_is_missing_once() -> None:
    module = _gpu(
        nvmlDeviceGetPowerUsage=_raise(pynvml.NVML_ERROR_NOT_SUPPORTED),
        nvmlDeviceGetTemperature=_raise(pynvml.NVML_ERROR_GPU_IS_LOST),
    )
    nvml, status = Nvml.open(module)
    assert nvml is not None and status == "ok"
    for _ in range(3):
        reading = nvml.read(0, set())
    assert reading.power_w is None and reading.temp_c is None
    assert reading.util_pct == 50.0 and reading.mem_used_mib == 1024.0
    assert nvml.unavailable == {schema.POWER_W: NOT_SUPPORTED, schema.TEMP_C: GPU_LOST}


def test_a_programming_error_raises() -> None:
    def broken(h: object) -> Any:
        raise TypeError("nvmlDeviceGetPowerUsage() takes 1 argument")

    nvml, _ = Nvml.open(_gpu(nvmlDeviceGetPowerUsage=broken))
    assert nvml is not None
    with pytest.raises(TypeError, match="takes 1 argument"):
        nvml.read(0, set())
