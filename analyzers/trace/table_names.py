"""The trace tables' names, sources, metadata keys and labels: the facts about the tables that need no
Arrow. `analyzers.trace.tables` holds their Arrow schemas and re-exports these, so a reader of the tables
imports one module; a command that reads no table (`tracer analyze FILE`, whose summary comes straight
from the file) imports this one and starts without pyarrow and NumPy (0.3 s of CPU a call, measured)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from analyzers.trace import api_names
from tracer.core.schema import MEMCPY_NAMES

CUDA_API = "cuda_api"
API_RUNTIME, API_DRIVER = "runtime", "driver"
"""The two values of `cuda_api.kind`."""
SOURCE_NSYS = "nsys"
"""`source` of every row an Nsight Systems export gave."""
SOURCE_KINETO = "kineto"
"""`source` of every row a Kineto (PyTorch profiler) trace gave."""
SOURCE_CUPTI = "cupti"
"""`source` of every row our in-worker CUPTI collector gave."""
SOURCE_XPROF = "xprof"
"""`source` of every row from an XPlane profile (jax.profiler, TensorFlow's profiler) or XProf's JSON of one."""
SOURCE_ROCPD = "rocpd"
"""`source` of every row from a rocpd database (rocprof, rocmProfileData)."""
SOURCE_PADDLE = "paddle"
"""`source` of every row from paddle.profiler's Chrome-trace JSON."""
SOURCE_MXNET = "mxnet"
"""`source` of every row from MXNet's profiler's Chrome-trace JSON."""
SOURCE_NSYS_JAX = "nsys-jax"
"""`source` of every row from an nsys-jax archive's recipe output."""
TRACE_OF_SOURCE = {
    SOURCE_NSYS: "nsys",
    SOURCE_CUPTI: "cupti",
    SOURCE_KINETO: "torch",
    SOURCE_XPROF: "native",
    SOURCE_PADDLE: "native",
    SOURCE_MXNET: "native",
}
"""The `--trace` backend (`tracer.core.options.TRACE_BACKENDS`) whose trace a source's rows are: what
an imported trace's run record says it was traced with."""
KERNELS = "kernels"
MEMCPY = "memcpy"
NVTX = "nvtx"
OSRT = "osrt"
OPERATORS = "operators"  # framework operators (PyTorch profiler `cpu_op` events: aten::conv2d, ...)
THREAD_TIMELINE = "thread_timeline"
"""What every thread did when (`THREAD_TIMELINE_SCHEMA`), written by the ingest (`analyzers.ingest.threads`)."""
SOURCE_SAMPLER = "sampler"
"""`source` of a thread-timeline row derived from the sampler's per-thread CPU times."""
SOURCE_PYSPY = "pyspy"
"""`source` of a thread-timeline row from a py-spy speedscope profile."""
ACTIVITY_IDLE, ACTIVITY_ACTIVE, ACTIVITY_BUSY = "idle", "active", "busy"
SAMPLER_ACTIVITIES = (ACTIVITY_IDLE, ACTIVITY_ACTIVE, ACTIVITY_BUSY)
"""A sampler row's `activity`, by level (index 0 = idle): the thread's CPU use between two samples."""
TRACE_META = "trace_meta.json"
BATCH_FACT = "batch"
"""Key, under a source in TRACE_META, of the batch size the trace itself recorded (Kineto's shapes)."""
RANKS_FACT, ALIGNMENT_FACT = "ranks", "alignment"
"""Keys, under a source in TRACE_META, of a run with several ranks: each rank's file, clock and shift onto
the run's one clock, and how the ranks were put on it (`analyzers.ingest.ranks.Alignment`)."""
WINDOW_FACT, WINDOW_NS_FACT = "window", "window_ns"
"""Keys, under a source in TRACE_META, of the trace window the run was traced in (`--trace-window`) and
its [start, end) in Unix ns (`analyzers.trace.trace_window`): the source's tables cover that window only."""

# CUPTI's CUpti_ActivityMemcpyKind (named once, in the worker's collector), plus the unified-memory
# ids that nsys's ENUM_CUDA_MEMCPY_OPER adds.
MEMCPY_KINDS: dict[int, str] = {
    **MEMCPY_NAMES,
    11: "Unified Host-to-Device",
    12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}
MEMSET_KIND = "[CUDA memset]"


def memcpy_kind_label(label: str) -> str:
    """The operation name nsys's cuda_gpu_mem_*_sum reports print, e.g. "[CUDA memcpy Host-to-Device]"."""
    return f"[CUDA memcpy {label}]"


API_CUDA = "CUDA"
API_HIP = "HIP"
HIP_PREFIXES = ("hip", "hsa_")
"""ROCm's runtime calls: PyTorch on ROCm files them under Kineto's `cuda_runtime` category all the same."""


def api_family(names: Iterable[str]) -> str:
    """What a run's GPU API is called in every table and figure: HIP where its calls are ROCm's."""
    return API_HIP if any(n.startswith(HIP_PREFIXES) for n in names) else API_CUDA


def family_label(label: str, family: str) -> str:
    """A label written for CUDA (`[CUDA memcpy Host-to-Device]`, `CUDA API`) as this family's."""
    return label if family == API_CUDA else label.replace(API_CUDA, family)


api_display_name = api_names.display_name  # nsys's display rule (analyzers.trace.api_names)


_KINETO_MEMCPY = re.compile(r"Memcpy\s+(\w+)")
_KINETO_MEMCPY_KINDS = {
    "HtoD": "Host-to-Device",
    "DtoH": "Device-to-Host",
    "DtoD": "Device-to-Device",
    "HtoH": "Host-to-Host",
    "PtoP": "Peer-to-Peer",
    "HtoA": "Host-to-Array",
    "AtoH": "Array-to-Host",
    "AtoA": "Array-to-Array",
    "AtoD": "Array-to-Device",
    "DtoA": "Device-to-Array",
}


def kineto_memcpy_kind(event_name: str) -> str:
    """Kineto names copies "Memcpy HtoD (Pageable -> Device)"; map to nsys's operation label."""
    m = _KINETO_MEMCPY.match(event_name)
    label = _KINETO_MEMCPY_KINDS.get(m.group(1), m.group(1)) if m else event_name
    return memcpy_kind_label(label)
