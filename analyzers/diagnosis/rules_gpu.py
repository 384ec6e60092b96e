"""Rules read from the GPU side: NVML samples and the CUDA API / kernel trace tables."""

from __future__ import annotations

import re
import statistics

from analyzers.cuda_api import ApiRow
from analyzers.diagnosis import rules_host  # noqa: F401 - the host rules are declared (and listed) first
from analyzers.diagnosis import thresholds as th
from analyzers.diagnosis.inputs import RunTables, column
from analyzers.diagnosis.knobs import knob
from analyzers.diagnosis.verdict import Evidence, Severity, Verdict, not_measured, quiet, rule
from tracer.core import schema

# nsys display names (the `_vNNNN` suffix cut), runtime and driver API
SYNC_CALLS = frozenset(
    {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
     "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"}
)  # fmt: skip
ALLOC_CALLS = frozenset({"cudaMalloc", "cudaFree", "cuMemAlloc", "cuMemFree"})
LAUNCH_CALLS = frozenset(
    {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchCooperativeKernel"}
)


_VERSION = re.compile(r"_v\d+$")


def _total(rows: tuple[ApiRow, ...], names: frozenset[str]) -> tuple[int, int]:
    """(total ns, calls) of the rows whose name, without any `_vNNNN` suffix (nsys keeps it on
    cudaLaunchKernelExC_v11060), is in `names`."""
    chosen = [r for r in rows if _VERSION.sub("", r.name) in names]
    return sum(r.total_ns for r in chosen), sum(r.calls for r in chosen)


@rule("gpu-under-used")
def gpu_under_used(t: RunTables) -> Verdict:
    name, title = "gpu-under-used", "GPU under-used"
    if t.record.spec.device != "gpu":
        return not_measured(name, title, "a CPU run")
    util = column(t.in_epochs(t.gpu, t.steady_epochs()), schema.UTIL_PCT)
    if not util:
        return not_measured(name, title, "no NVML utilisation samples in the epochs")
    mean = statistics.fmean(util)
    evidence = (Evidence("GPU utilisation", mean, "%"), Evidence("samples", float(len(util)), ""))
    if mean >= th.GPU_UNDERUSED_PCT:
        return quiet(name, title, "the GPU is busy in the steady epochs", mean, "%", th.GPU_UNDERUSED_PCT, evidence)
    fw = t.record.spec.framework
    return Verdict(name, title, True, True, Severity.HIGH if mean < th.GPU_UNDERUSED_PCT / 2 else Severity.MEDIUM,
                   f"the GPU is busy {mean:.0f} % of the steady epochs", mean, "%", th.GPU_UNDERUSED_PCT, evidence,
                   "a larger --batch; " + knob(fw, "workers", "more loader workers"))  # fmt: skip


def sync_share(rows: tuple[ApiRow, ...]) -> float | None:
    total = sum(r.total_ns for r in rows)
    return 100 * _total(rows, SYNC_CALLS)[0] / total if total else None


@rule("sync-dominated")
def sync_dominated(t: RunTables) -> Verdict:
    name, title = "sync-dominated", "synchronisation-dominated CUDA split"
    share = sync_share(t.cuda_whole)
    if share is None:
        return not_measured(name, title, "no CUDA API trace (--trace nsys or cupti)")
    sync_ns, calls = _total(t.cuda_whole, SYNC_CALLS)
    evidence = (
        Evidence("Synchronize calls", float(calls), ""),
        Evidence("Synchronize time", sync_ns / 1e6, "ms"),
        Evidence("CUDA API time", sum(r.total_ns for r in t.cuda_whole) / 1e6, "ms"),
    )
    if share <= th.SYNC_SHARE_PCT:
        return quiet(name, title, "synchronisation is a small share of the CUDA API time", share,
                     "% of CUDA API time", th.SYNC_SHARE_PCT, evidence)  # fmt: skip
    return Verdict(name, title, True, True, Severity.MEDIUM,
                   f"the host waits in Synchronize calls {share:.0f} % of its CUDA API time", share,
                   "% of CUDA API time", th.SYNC_SHARE_PCT, evidence,
                   knob(t.record.spec.framework, "sync"))  # fmt: skip


def steady_steps(t: RunTables) -> int | None:
    """Steps in the steady phase: traced step ranges after the first, else the per-step table's rows
    after the first epoch, else images / batch of the later epochs."""
    if t.nvtx_steps > 1:
        return t.nvtx_steps - 1
    if t.steps is not None and t.steps.num_rows:
        epochs = column(t.steps, "epoch")
        return sum(1 for e in epochs if e > 1) or len(epochs)
    if t.epochs:
        batch = max(1, t.record.spec.batch)
        return sum(-(-e.images // batch) for e in t.steady_epochs())
    return None


@rule("allocator-churn")
def allocator_churn(t: RunTables) -> Verdict:
    name, title = "allocator-churn", "allocator churn"
    if not t.cuda_steady:
        return not_measured(name, title, "no CUDA API trace with a steady phase")
    steps = steady_steps(t)
    if not steps:
        return not_measured(name, title, "the steady phase has no steps to count")
    ns, calls = _total(t.cuda_steady, ALLOC_CALLS)
    per_step = calls / steps
    evidence = (
        Evidence("cudaMalloc/cudaFree calls in steady state", float(calls), ""),
        Evidence("their time", ns / 1e6, "ms"),
        Evidence("steady steps", float(steps), ""),
    )
    if per_step <= th.ALLOC_PER_STEP:
        return quiet(name, title, "device memory is reused between steps", per_step, "calls/step",
                     th.ALLOC_PER_STEP, evidence)  # fmt: skip
    return Verdict(name, title, True, True, Severity.MEDIUM,
                   f"{per_step:.1f} cudaMalloc/cudaFree calls per steady step: no caching allocator at work",
                   per_step, "calls/step", th.ALLOC_PER_STEP, evidence,
                   knob(t.record.spec.framework, "allocator"))  # fmt: skip


@rule("launch-bound")
def launch_bound(t: RunTables) -> Verdict:
    name, title = "launch-bound", "launch-bound"
    if not t.cuda_whole or t.kernel_count == 0 or t.kernel_median_ns is None:
        return not_measured(name, title, "no CUDA API and kernel trace")
    launch_ns, launches = _total(t.cuda_whole, LAUNCH_CALLS)
    ratio = launch_ns / t.kernel_total_ns if t.kernel_total_ns else 0.0
    median_us = t.kernel_median_ns / 1e3
    evidence = (
        Evidence("launch calls", float(launches), ""),
        Evidence("launch API time", launch_ns / 1e6, "ms"),
        Evidence("kernel time", t.kernel_total_ns / 1e6, "ms"),
        Evidence("kernels", float(t.kernel_count), ""),
        Evidence("median kernel", median_us, "µs"),
    )
    if ratio < th.LAUNCH_TO_KERNEL_RATIO or median_us >= th.SHORT_KERNEL_US:
        return quiet(name, title, "kernels run long enough to hide their launches", ratio,
                     "launch time / kernel time", th.LAUNCH_TO_KERNEL_RATIO, evidence)  # fmt: skip
    return Verdict(name, title, True, True, Severity.MEDIUM,
                   f"launching takes {ratio:.2f}x the kernels' own time, median kernel {median_us:.1f} µs",
                   ratio, "launch time / kernel time", th.LAUNCH_TO_KERNEL_RATIO, evidence,
                   knob(t.record.spec.framework, "launch", "fewer, larger kernels") + "; a larger --batch")  # fmt: skip
