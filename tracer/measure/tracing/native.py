"""`--trace native`: each framework's own profiler inside the worker, over the trace window
(`tracer/worker/native_trace.py`): the PyTorch profiler, jax.profiler and TensorFlow's profiler (XPlane),
paddle.profiler and MXNet's profiler. What it writes is ingested like any trace of that format, each row
naming its source (`kineto`, `xprof`). `--trace torch` is the PyTorch profiler alone, kept for PyTorch.
"""

from __future__ import annotations

from tracer.core.errors import UserError
from tracer.core.records import RunSpec
from tracer.core.runfolder import RunFolder
from tracer.core.schema import NATIVE_TRACE, NATIVE_TRACE_FILES, TRACE_ENV
from tracer.measure.tracing.base import TraceBackend

NO_PROFILER = {"singa": "SINGA has no profiler of its own"}
"""Frameworks refused, and why (every framework not in NATIVE_TRACE_FILES should be here)."""


PROFILER_ENVIRONMENT = {
    "mxnet": {
        "MXNET_EXEC_BULK_EXEC_TRAIN": "0",
        "MXNET_EXEC_BULK_EXEC_INFERENCE": "0",
        "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD": "0",  # a hybridized block's CachedOp bulks by these
        "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD": "0",
    }
}
"""Settings a profiler needs to see operators: MXNet runs a hybridized model's operators in bulk, which its
profiler records as one `ImperativeBulk` event; with bulk execution off each operator is its own event
(a traced MXNet run is then not the untraced one's speed, as no traced run is)."""


class NativeBackend(TraceBackend):
    name = NATIVE_TRACE

    def check(self, spec: RunSpec, python: str = "") -> None:
        if spec.framework not in NATIVE_TRACE_FILES:
            why = NO_PROFILER.get(spec.framework, f"{spec.framework} has no profiler this tracer drives")
            raise UserError(f"--trace native: {why}; use --trace nsys or --trace cupti")

    def environment(self, folder: RunFolder, spec: RunSpec) -> dict[str, str]:
        return {TRACE_ENV: NATIVE_TRACE, **PROFILER_ENVIRONMENT.get(spec.framework, {})}

    def finish(self, folder: RunFolder) -> list[str]:
        framework = folder.read_record().measurement.framework
        trace = f"raw/{NATIVE_TRACE_FILES[framework]}"
        if not (folder.path / trace).exists():
            raise RuntimeError(f"the {framework} profiler wrote no {trace} (see raw/worker.log)")
        return [trace]
