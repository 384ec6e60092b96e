"""Every NVML call goes through here and yields None instead of raising: no GPU, no driver or an
unsupported query are facts to record, not errors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


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
    """An initialised NVML session; `Nvml.open()` gives None (and a reason) where there is none."""

    def __init__(self, module: Any) -> None:
        self._nv = module
        self.handles = [module.nvmlDeviceGetHandleByIndex(i) for i in range(module.nvmlDeviceGetCount())]

    @staticmethod
    def open() -> tuple[Nvml | None, str]:
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as e:  # noqa: BLE001 - missing library, driver or device
            return None, f"not available ({type(e).__name__}: {e})".strip()
        try:
            nvml = Nvml(pynvml)
        except Exception as e:  # noqa: BLE001
            return None, f"not available ({e})"
        if not nvml.handles:
            return None, "no NVIDIA GPU"
        return nvml, "ok"

    def _try(self, fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends
            return None

    def driver_version(self) -> str:
        return str(self._try(self._nv.nvmlSystemGetDriverVersion) or "")

    def cuda_driver_version(self) -> str:
        v = self._try(self._nv.nvmlSystemGetCudaDriverVersion)
        return f"{v // 1000}.{v % 1000 // 10}" if v else ""

    def describe(self, index: int) -> tuple[str, float, str]:
        h = self.handles[index]
        name = self._try(lambda: self._nv.nvmlDeviceGetName(h)) or "unknown"
        mem = self._try(lambda: self._nv.nvmlDeviceGetMemoryInfo(h))
        uuid = self._try(lambda: self._nv.nvmlDeviceGetUUID(h)) or ""
        return str(name), (mem.total / 2**20 if mem else 0.0), str(uuid)

    def read(self, index: int, pids: set[int]) -> GpuReading:
        nv, h = self._nv, self.handles[index]
        util = self._try(lambda: nv.nvmlDeviceGetUtilizationRates(h))
        mem = self._try(lambda: nv.nvmlDeviceGetMemoryInfo(h))
        power = self._try(lambda: nv.nvmlDeviceGetPowerUsage(h))
        energy = self._try(lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h))
        temp = self._try(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        procs = self._try(lambda: nv.nvmlDeviceGetComputeRunningProcesses(h)) or []
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
        self._try(self._nv.nvmlShutdown)
