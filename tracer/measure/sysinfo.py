"""Facts about the machine a run ran on, for run.json."""

from __future__ import annotations

import platform
import socket
import sys
from pathlib import Path

import psutil

from tracer.core.records import EnvironmentInfo, GpuInfo
from tracer.measure.nvml import Nvml


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect(nvml: Nvml | None, nvml_status: str) -> EnvironmentInfo:
    gpus: tuple[GpuInfo, ...] = ()
    driver = cuda = ""
    if nvml is not None:
        gpus = tuple(GpuInfo(i, *nvml.describe(i)) for i in range(len(nvml.handles)))
        driver, cuda = nvml.driver_version(), nvml.cuda_driver_version()
    return EnvironmentInfo(
        hostname=socket.gethostname(),
        os=platform.platform(),
        cpu_model=cpu_model(),
        cpu_logical_cores=psutil.cpu_count(logical=True) or 1,
        cpu_physical_cores=psutil.cpu_count(logical=False) or 1,
        ram_total_mib=psutil.virtual_memory().total / 2**20,
        tracer_python=sys.version.split()[0],
        gpus=gpus,
        nvidia_driver=driver,
        cuda_driver_version=cuda,
        nvml=nvml_status,
    )
