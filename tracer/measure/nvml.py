"""Every NVML call goes through here. What NVML says it cannot do is a fact to record, told apart by
its reason: the query is not supported on this GPU or driver, the GPU fell off the bus, or the driver
or its library is missing; each reading a run did not get is recorded once per field with its reason
(`Nvml.unavailable`, written to run.json). Anything that is not an NVML error (a bug here, a wrong
argument) raises, so it is not hidden as a missing reading."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tracer.core import schema

T = TypeVar("T")

NOT_SUPPORTED = "not supported"
GPU_LOST = "GPU lost"
MISSING = "driver/library missing"
NO_PERMISSION = "no permission"
_REASONS = {
    "NVMLError_NotSupported": NOT_SUPPORTED,
    "NVMLError_FunctionNotFound": NOT_SUPPORTED,  # a driver older than the query
    "NVMLError_GpuIsLost": GPU_LOST,
    "NVMLError_LibraryNotFound": MISSING,
    "NVMLError_DriverNotLoaded": MISSING,
    "NVMLError_LibRmVersionMismatch": MISSING,
    "NVMLError_NoPermission": NO_PERMISSION,
}


def reason(module: Any, error: BaseException) -> str | None:
    """Why NVML could not answer, in the words above; None for what is not an NVML error (a bug)."""
    if not isinstance(error, module.NVMLError):
        return None
    for name, words in _REASONS.items():
        kind = getattr(module, name, None)
        if kind is not None and isinstance(error, kind):
            return words
    return f"NVML error: {error}"


@dataclass(frozen=True)
class GpuReading:
    gpu: int
    util_pct: float | None
    mem_util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    energy_mj: float | None
    temp_c: float | None
    proc_mem_mib: float | None


class Nvml:
    """An initialised NVML session; `Nvml.open()` gives None (and the reason) where there is none."""

    def __init__(self, module: Any) -> None:
        self._nv = module
        self.unavailable: dict[str, str] = {}  # field -> why NVML did not give it (the first reason seen)
        self.handles = [module.nvmlDeviceGetHandleByIndex(i) for i in range(module.nvmlDeviceGetCount())]

    @staticmethod
    def open(module: Any = None) -> tuple[Nvml | None, str]:
        if module is None:
            try:
                import pynvml
            except ImportError:
                return None, f"not available ({MISSING}: pynvml is not installed)"
            module = pynvml
        try:
            module.nvmlInit()
            nvml = Nvml(module)
        except module.NVMLError as e:
            return None, f"not available ({reason(module, e)}: {type(e).__name__})"
        if not nvml.handles:
            return None, "no NVIDIA GPU"
        return nvml, "ok"

    def _try(self, what: str, fn: Callable[[], T]) -> T | None:
        """`fn()`, or None where NVML says it cannot (the reason kept once for `what`)."""
        try:
            return fn()
        except self._nv.NVMLError as e:
            self.unavailable.setdefault(what, str(reason(self._nv, e)))
            return None

    def driver_version(self) -> str:
        return str(self._try("driver", self._nv.nvmlSystemGetDriverVersion) or "")

    def cuda_driver_version(self) -> str:
        v = self._try("cuda_driver_version", self._nv.nvmlSystemGetCudaDriverVersion)
        return f"{v // 1000}.{v % 1000 // 10}" if v else ""

    def describe(self, index: int) -> tuple[str, float, str]:
        h = self.handles[index]
        name = self._try("name", lambda: self._nv.nvmlDeviceGetName(h)) or "unknown"
        mem = self._try(schema.MEM_TOTAL_MIB, lambda: self._nv.nvmlDeviceGetMemoryInfo(h))
        uuid = self._try("uuid", lambda: self._nv.nvmlDeviceGetUUID(h)) or ""
        return str(name), (mem.total / 2**20 if mem else 0.0), str(uuid)

    def read(self, index: int, pids: set[int]) -> GpuReading:
        nv, h = self._nv, self.handles[index]
        util = self._try(schema.UTIL_PCT, lambda: nv.nvmlDeviceGetUtilizationRates(h))
        mem = self._try(schema.MEM_USED_MIB, lambda: nv.nvmlDeviceGetMemoryInfo(h))
        power = self._try(schema.POWER_W, lambda: nv.nvmlDeviceGetPowerUsage(h))
        energy = self._try(schema.ENERGY_MJ, lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h))
        temp = self._try(schema.TEMP_C, lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        procs = self._try(schema.PROC_MEM_MIB, lambda: nv.nvmlDeviceGetComputeRunningProcesses(h)) or []
        used = [p.usedGpuMemory for p in procs if p.pid in pids and p.usedGpuMemory is not None]
        return GpuReading(
            gpu=index,
            util_pct=float(util.gpu) if util else None,
            mem_util_pct=float(util.memory) if util else None,
            mem_used_mib=mem.used / 2**20 if mem else None,
            mem_total_mib=mem.total / 2**20 if mem else None,
            power_w=power / 1000.0 if power is not None else None,
            energy_mj=float(energy) if energy is not None else None,
            temp_c=float(temp) if temp is not None else None,
            proc_mem_mib=sum(used) / 2**20 if used else (0.0 if procs else None),
        )

    def close(self) -> None:
        self._try("shutdown", self._nv.nvmlShutdown)
