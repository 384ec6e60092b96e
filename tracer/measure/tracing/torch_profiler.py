"""`--trace torch`: the PyTorch profiler inside the PyTorch worker (`tracer/worker/torch_trace.py`), and
inside a command's processes that train with torch (the probe, `tracer/probe/torch_window.py`).

A Chrome trace, `raw/kineto.json.gz` (a command's ranks: `raw/kineto-rank<N>.json.gz`), as PyTorch users
know it: CPU operators, and CUDA runtime calls and kernels on GPU runs. Works on CPU too. PyTorch only.
"""

from __future__ import annotations

import json
import re

from tracer.core.cases import NO_FRAMEWORK
from tracer.core.errors import UserError
from tracer.core.records import RunSpec
from tracer.core.runfolder import RunFolder
from tracer.core.schema import TORCH_RANK_TRACE, TORCH_TRACE, TRACE_ENV, TRACE_TORCH, TRACE_WINDOW_ENV
from tracer.core.window import worker_window
from tracer.measure.tracing.base import TraceBackend

TRACE = f"raw/{TORCH_TRACE}"
_RANK_TRACE = re.compile(re.escape(TORCH_RANK_TRACE).replace("%d", r"\d+") + "$")


class TorchProfilerBackend(TraceBackend):
    name = "torch"

    def check(self, spec: RunSpec, python: str = "") -> None:
        if spec.framework not in ("pytorch", NO_FRAMEWORK):  # a command's framework is known once it ran
            raise UserError(
                f"--trace torch is the PyTorch profiler and works only with --framework pytorch, "
                f"not {spec.framework}; use --trace nsys or --trace cupti"
            )

    def environment(self, folder: RunFolder, spec: RunSpec) -> dict[str, str]:
        bounds = worker_window(spec.trace_window)  # for a command's probe; the worker reads its configuration
        return {TRACE_ENV: TRACE_TORCH, **({TRACE_WINDOW_ENV: json.dumps(bounds)} if bounds else {})}

    def finish(self, folder: RunFolder) -> list[str]:
        ranks = sorted(p.name for p in folder.raw_dir.glob("*") if _RANK_TRACE.match(p.name))
        found = ([TRACE] if (folder.path / TRACE).exists() else []) + [f"raw/{name}" for name in ranks]
        if not found:
            raise RuntimeError(
                f"the PyTorch profiler wrote no {TRACE}: see raw/worker.log, or for a command its trace_error "
                "events (a script that never imported torch, or never reached the trace window, has no trace)"
            )
        return found
