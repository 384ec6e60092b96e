"""A CPU's peak FLOP/s, measured once per machine and cached: no datasheet states what a VM's cores reach.

The measure is a float32 matrix product (NumPy's BLAS, on every core this process may use), the best of a
few repeats: what dense training work can reach on these cores. Beside it, the nominal figure where the
CPU's name states its clock: cores x clock x FLOPs per cycle of its widest vector FMA (two FMA units
assumed, as on server cores), said to be an assumption.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tracer.core.paths import cache_root

CACHE_FILE = "cpu_peak.json"
GEMM_N = 1024
REPEATS = 5
METHOD = f"float32 {GEMM_N}x{GEMM_N} matrix product (NumPy BLAS), best of {REPEATS}, on every usable core"


@dataclass(frozen=True)
class CpuPeak:
    machine: str  # the key it was measured under (tracer.measure.cpu_peak.machine_key)
    measured_flops_per_s: float
    method: str
    cores: int
    measured_at: str  # UTC, ISO 8601
    nominal_flops_per_s: float | None = None
    nominal_source: str = "not known: the CPU's name states no clock"


def machine_key(cpu_model: str, logical_cores: int, hostname: str) -> str:
    """One machine: its host, CPU model and core count (a run records all three in run.json)."""
    return f"{hostname}|{cpu_model}|{logical_cores}"


def cached(key: str) -> CpuPeak | None:
    """The peak measured on the machine `key` names, if it was measured here."""
    try:
        found = json.loads((cache_root() / CACHE_FILE).read_text()).get(key)
        return CpuPeak(**found) if isinstance(found, dict) else None
    except (OSError, ValueError, TypeError):
        return None


def measure(key: str) -> CpuPeak:
    """Measures this machine's peak now and caches it under `key`."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((GEMM_N, GEMM_N), dtype=np.float32)
    b = rng.standard_normal((GEMM_N, GEMM_N), dtype=np.float32)
    a @ b  # the BLAS threads start
    best = min(_timed(lambda: a @ b) for _ in range(REPEATS))
    nominal, source = nominal_peak()
    peak = CpuPeak(
        machine=key,
        measured_flops_per_s=2 * GEMM_N**3 / best,
        method=METHOD,
        cores=len(os.sched_getaffinity(0)),
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        nominal_flops_per_s=nominal,
        nominal_source=source,
    )
    _store(peak)
    return peak


def _timed(work: object) -> float:
    start = time.perf_counter()
    work()  # type: ignore[operator]
    return time.perf_counter() - start


def _store(peak: CpuPeak) -> None:
    path = cache_root() / CACHE_FILE
    try:
        known = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        known = {}
    known[peak.machine] = asdict(peak)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(known, indent=1))
        tmp.replace(path)
    except OSError:  # a cache that cannot be written: measured again next time, the figure still shown
        with contextlib.suppress(OSError):
            tmp.unlink()


def nominal_peak(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[float | None, str]:
    """cores x the clock in the CPU's name x fp32 FLOPs per cycle (AVX-512: 64, AVX2 with FMA: 32, assuming
    two FMA units); None where the name states no clock."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None, "not known: /proc/cpuinfo unreadable"
    name = re.search(r"^model name\s*:\s*(.*)$", text, re.M)
    clock = re.search(r"@\s*([\d.]+)\s*GHz", name.group(1)) if name else None
    if clock is None:
        return None, "not known: the CPU's name states no clock"
    found = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    flags = set(found.group(1).split()) if found else set()
    per_cycle = 64 if "avx512f" in flags else 32 if {"avx2", "fma"} <= flags else None
    if per_cycle is None:
        return None, "not known: no AVX2/FMA or AVX-512 in the CPU's flags"
    import psutil

    cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    ghz = float(clock.group(1))
    return (
        cores * ghz * 1e9 * per_cycle,
        f"{cores} physical cores x {ghz} GHz (the name's base clock) x {per_cycle} fp32 FLOPs a cycle"
        " (two FMA units assumed)",
    )
