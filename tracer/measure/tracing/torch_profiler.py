"""`--trace torch`: the PyTorch profiler inside the PyTorch worker (`tracer/worker/torch_trace.py`).

A Chrome trace, `raw/kineto.json.gz`, as PyTorch users know it: CPU operators, and CUDA runtime
calls and kernels on GPU runs. Works on CPU too. PyTorch only.
"""

from __future__ import annotations

from tracer.core.errors import UserError
from tracer.core.records import RunSpec
from tracer.core.runfolder import RunFolder
from tracer.core.schema import TRACE_ENV, TRACE_TORCH
from tracer.measure.tracing.base import TraceBackend

TRACE = "raw/kineto.json.gz"


class TorchProfilerBackend(TraceBackend):
    name = "torch"

    def check(self, spec: RunSpec, python: str = "") -> None:
        if spec.framework != "pytorch":
            raise UserError(
                f"--trace torch is the PyTorch profiler and works only with --framework pytorch, "
                f"not {spec.framework}; use --trace nsys or --trace cupti"
            )

    def environment(self, folder: RunFolder, spec: RunSpec) -> dict[str, str]:
        return {TRACE_ENV: TRACE_TORCH}

    def finish(self, folder: RunFolder) -> list[str]:
        if not (folder.path / TRACE).exists():
            raise RuntimeError(f"the PyTorch profiler wrote no {TRACE} (see raw/worker.log)")
        return [TRACE]
