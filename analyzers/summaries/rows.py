"""The summaries' typed rows (a CUDA API call, a kernel, a memory operation, a kernel class, a thread)
and the rules that need nothing but rows: declared apart from the summaries that compute them, which
read Parquet tables, so that `tracer analyze FILE` (its rows come straight from the file, or from the
cache) builds and prints them without importing Arrow or NumPy."""

from __future__ import annotations

from dataclasses import dataclass

from analyzers.trace import kernel_classes
from tracer.core import schema


@dataclass(frozen=True)
class DurationStats:
    """The durations of one group (a CUDA call's name, a kernel, a memory operation's kind) as nsys's
    summaries give them and `summarise_durations` computes them: times in ns, `calls` as nsys's Count or
    Instances, `med_ns` the usual median, `stddev_ns` the sample standard deviation (0 for one). Declared
    once: the API, kernel and memcpy rows extend it (tests/analyzers/summaries/test_duration_stats.py holds it so)."""

    name: str
    time_pct: float
    total_ns: int
    calls: int
    avg_ns: float
    med_ns: float
    min_ns: int
    max_ns: int
    stddev_ns: float


@dataclass(frozen=True)
class ApiRow(DurationStats):
    """One line of cuda_api_sum; `name` is nsys's display name."""


@dataclass(frozen=True)
class KernelRow(DurationStats):
    """One line of cuda_gpu_kern_sum (`name` demangled; `calls` is nsys's "Instances")."""

    short_name: str  # unique among the rows (analyzers.trace.kernel_names.short_names)
    kernel_class: str = ""  # what it does (analyzers.trace.kernel_classes)


@dataclass(frozen=True)
class MemcpyRow(DurationStats):
    """One line of cuda_gpu_mem_time_sum: `name` is an operation kind such as "[CUDA memcpy Host-to-Device]",
    `calls` nsys's "Count"."""


@dataclass(frozen=True)
class ClassRow:
    """Kernel time of one class (analyzers.trace.kernel_classes), summed over its kernels."""

    kernel_class: str
    label: str
    time_pct: float  # of all kernel time
    total_ns: int
    calls: int
    kernels: int  # distinct kernel names in it


def class_summary(rows: list[KernelRow]) -> list[ClassRow]:
    """The kernel rows summed by class, largest first; classes without a kernel left out."""
    total = sum(r.total_ns for r in rows)
    out = []
    for c in kernel_classes.CLASSES:
        members = [r for r in rows if r.kernel_class == c.key]
        if members:
            ns = sum(r.total_ns for r in members)
            pct = 100.0 * ns / total if total else 0.0
            out.append(ClassRow(c.key, c.label, pct, ns, sum(r.calls for r in members), len(members)))
    return sorted(out, key=lambda r: -r.total_ns)


def other_share(rows: list[ClassRow]) -> float | None:
    """The share (0..1) of kernel time the classifier left in `other`; None without kernel time."""
    total = sum(r.total_ns for r in rows)
    other = sum(r.total_ns for r in rows if r.kernel_class == kernel_classes.OTHER)
    return other / total if total else None


NO_THREAD = 0  # tid 0 is no thread of the process: nsys puts process-wide events there (shown as "[Unknown]")


@dataclass(frozen=True)
class ThreadRow:
    """One thread: CPU seconds it used (sampler), time seen busy or active, time in OS-runtime calls,
    and what it did most (the OSRT call or Python function with the most time)."""

    pid: int
    tid: int
    thread_name: str
    cpu_s: float
    active_ns: int
    osrt_ns: int
    top_osrt: str
    pyspy_ns: int
    top_python: str


def shown(tid: int, name: str) -> bool:
    """Whether a thread gets a row: not tid 0 (`NO_THREAD`) nor the tool's own watchdog (not training)."""
    return tid != NO_THREAD and name != schema.LIFELINE_THREAD
