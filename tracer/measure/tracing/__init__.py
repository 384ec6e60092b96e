"""Trace backends selected by `tracer profile --trace NAME`."""

from __future__ import annotations

from tracer.core.errors import UserError
from tracer.measure.tracing.base import TraceBackend
from tracer.measure.tracing.cupti import CuptiBackend
from tracer.measure.tracing.native import NativeBackend
from tracer.measure.tracing.nsys import NsysBackend
from tracer.measure.tracing.torch_profiler import TorchProfilerBackend

BACKENDS: dict[str, type[TraceBackend]] = {
    "none": TraceBackend,
    "nsys": NsysBackend,
    "cupti": CuptiBackend,
    "torch": TorchProfilerBackend,
    "native": NativeBackend,
}

#: One line per backend for `tracer profile --help`.
HELP = {
    "none": "no tracer, only the sampler",
    "nsys": "Nsight Systems: CUDA+NVTX+OS runtime (OS runtime+NVTX on CPU); raw/trace.nsys-rep + .arrow (or .sqlite)",
    "cupti": "CUPTI Activity API in the worker (any framework, --device gpu, needs cupti-python); raw/cupti/",
    "torch": "PyTorch profiler (pytorch only; CPU and GPU); raw/kineto.json.gz",
    "native": "the framework's own profiler: PyTorch's, jax.profiler, TensorFlow's (XPlane), paddle.profiler, "
    "MXNet's (not SINGA); raw/",
}


def names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def backend(name: str) -> TraceBackend:
    try:
        return BACKENDS[name]()
    except KeyError:
        raise UserError(f"unknown trace backend '{name}': choose one of {', '.join(BACKENDS)}") from None
