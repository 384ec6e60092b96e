"""Rules read from the GPU side: NVML samples and the CUDA API / kernel trace tables."""

from __future__ import annotations

import statistics

from analyzers.diagnosis import rules_host  # noqa: F401 - the host rules are declared (and listed) first
from analyzers.diagnosis import thresholds as th
from analyzers.diagnosis.inputs import RunTables, column, steady_data_wait, step_threads
from analyzers.diagnosis.knobs import join, knob, larger_batch
from analyzers.diagnosis.verdict import Evidence, RuleName, Severity, Verdict, not_measured, quiet, rule
from analyzers.figures.coverage import Explanation, explain
from analyzers.render.display import ratio_text
from analyzers.summaries.rows import ApiRow
from analyzers.trace.api_names import ALLOC_CALLS, LAUNCH_CALLS, SYNC_CALLS, match_name
from tracer.core import schema
from tracer.core.frameworks import Tuning
from tracer.core.workload import Known

# the rules' names and titles, each declared once (analyzers.diagnosis.verdict.RuleName)
GPU_UNDER_USED = RuleName("gpu-under-used", "GPU under-used")
HOST_BOUND = RuleName("host-bound", "host-bound")
SYNC_DOMINATED = RuleName("sync-dominated", "synchronisation-dominated CUDA split")
ALLOCATOR_CHURN = RuleName("allocator-churn", "allocator churn")
LAUNCH_BOUND = RuleName("launch-bound", "launch-bound")


def _total(rows: tuple[ApiRow, ...], names: frozenset[str]) -> tuple[int, int]:
    """(total ns, calls) of the rows whose match name (`analyzers.trace.api_names`: any `_vNNNN` suffix cut,
    which nsys keeps on cudaLaunchKernelExC_v11060) is in `names`."""
    chosen = [r for r in rows if match_name(r.name) in names]
    return sum(r.total_ns for r in chosen), sum(r.calls for r in chosen)


def steady_gpu_util(t: RunTables) -> list[float]:
    return column(t.in_epochs(t.gpu, t.steady_epochs()), schema.UTIL_PCT)


HOST_ISSUING = "the host issuing work"
"""The part of the GPU's idle time data wait leaves: the host's, by elimination (nothing else holds a step)."""


def idle_explained(util_pct: float, wait_pct: float) -> Explanation:
    """The GPU's idle share of the steady epochs (100 - NVML utilisation) split into the data wait (the GPU has
    no batch) and the rest (the host has not issued the work), by the coverage rule: the host is named the
    cause only where data wait leaves it `coverage.NAMED_PCT` of the idle time."""
    idle = max(0.0, 100.0 - util_pct)
    waiting = min(wait_pct, idle)
    return explain(idle, {"data wait": waiting, HOST_ISSUING: idle - waiting})


@rule(GPU_UNDER_USED)
def gpu_under_used(t: RunTables) -> Verdict:
    name, title = GPU_UNDER_USED
    if t.record.measurement.device != "gpu":
        return not_measured(name, title, "a CPU run")
    util = steady_gpu_util(t)
    if not util:
        return not_measured(name, title, "no NVML utilisation samples in the epochs")
    mean = statistics.fmean(util)
    evidence = (Evidence("GPU utilisation", mean, "%"), Evidence("samples", float(len(util)), ""))
    if mean >= th.GPU_UNDERUSED_PCT:
        return quiet(name, title, "the GPU is busy in the steady epochs", mean, "%", th.GPU_UNDERUSED_PCT, evidence)
    wait = steady_data_wait(t)
    if wait is None:
        advice = larger_batch(t.record, "input-bound and host-bound need per-step timing to say which side waits")
    elif wait.share_pct > th.INPUT_BOUND_PCT:
        advice = join(knob(t.record, Tuning.WORKERS, "more loader workers"), "see input-bound")
    else:
        advice = join(larger_batch(t.record), knob(t.record, Tuning.LAUNCH, "fewer host round trips"), "see host-bound")
    finding = f"the GPU is busy {mean:.0f} % of the steady epochs"
    if wait is not None:  # what keeps it idle, sized: the knob above follows the larger part
        finding += f"; sized against its idle time: {idle_explained(mean, wait.share_pct).text('it')}"
    return Verdict(name, title, True, True, Severity.HIGH if mean < th.GPU_UNDERUSED_HIGH_PCT else Severity.MEDIUM,
                   finding, mean, "%", th.GPU_UNDERUSED_PCT, evidence, advice)  # fmt: skip


HOST_THREADS_SHOWN = 3  # the busiest threads of the training process named in the evidence


@rule(HOST_BOUND)
def host_bound(t: RunTables) -> Verdict:
    """Neither the loader (data wait is small) nor the GPU (it idles) sets the pace: the host does, issuing
    the step's operations (Python dispatch, kernel launches, the interpreter lock its threads share). The
    evidence is the CPU of the training process's threads; none need be saturated, as they take turns."""
    name, title = HOST_BOUND
    if t.record.measurement.device != "gpu":
        return not_measured(name, title, "a CPU run (the host is the device)")
    wait = steady_data_wait(t)
    if wait is None:
        return not_measured(name, title, "the run has no per-step timing (samples/steps)")
    util = steady_gpu_util(t)
    if not util:
        return not_measured(name, title, "no NVML utilisation samples in the steady epochs")
    mean = statistics.fmean(util)
    threads = [r for r in step_threads(t) if r.cores >= th.HOST_THREAD_MIN_CORES]
    together = sum(r.cores for r in threads) if threads else None
    evidence = (
        Evidence("GPU utilisation", mean, "%"),
        Evidence("data wait", wait.share_pct, "% of step time"),
        Evidence("mean step", 1e3 * wait.step_s / wait.steps, "ms"),
        Evidence("training process's threads together", together, "cores"),
        *(Evidence(f"CPU of the {r.label()}", r.cores, "cores") for r in threads[:HOST_THREADS_SHOWN]),
    )
    if wait.share_pct > th.INPUT_BOUND_PCT:
        return quiet(name, title, "the input pipeline sets the pace (see input-bound)", mean, "%",
                     th.HOST_BOUND_GPU_PCT, evidence)  # fmt: skip
    if mean >= th.HOST_BOUND_GPU_PCT:
        return quiet(name, title, "the GPU is busy: it sets the pace", mean, "%", th.HOST_BOUND_GPU_PCT, evidence)
    sized = idle_explained(mean, wait.share_pct)
    evidence += tuple(Evidence(f"GPU idle time: {p.label}", p.pct, "%") for p in sized.parts)
    finding = f"the GPU waits for the host to issue work (GPU busy {mean:.0f} %, data wait {wait.share_pct:.0f} %"
    if sized.cause != HOST_ISSUING:  # the host covers too little of the idle time to be named its cause
        finding = f"the GPU idles {100 - mean:.0f} % of the steady epochs (data wait {wait.share_pct:.0f} %"
    if threads:
        busiest = threads[0]
        finding += (f"; the training process's threads share {together:.2f} cores, the busiest "
                    f"({busiest.label()}) {busiest.cores:.2f}")  # fmt: skip
    finding += f"); sized against the GPU's idle time: {sized.text('it')}"
    return Verdict(name, title, True, True, Severity.HIGH if mean < th.GPU_UNDERUSED_PCT else Severity.MEDIUM,
                   finding, mean, "%", th.HOST_BOUND_GPU_PCT, evidence,
                   join(larger_batch(t.record, "the same launches carry more images"),
                        knob(t.record, Tuning.LAUNCH, "fewer host round trips per step")))  # fmt: skip


def sync_share(rows: tuple[ApiRow, ...]) -> float | None:
    total = sum(r.total_ns for r in rows)
    return 100 * _total(rows, SYNC_CALLS)[0] / total if total else None


@rule(SYNC_DOMINATED)
def sync_dominated(t: RunTables) -> Verdict:
    name, title = SYNC_DOMINATED
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
                   knob(t.record, Tuning.SYNC))  # fmt: skip


def steady_steps(t: RunTables) -> int | None:
    """Steps in the steady phase (analyzers.figures.phases), the phase `cuda_steady` covers, so a per-step rate
    divides counts and steps of one phase: the per-step table's rows of the steady epochs, else the
    NVTX step ranges that start in it, else images / batch of the steady epochs."""
    steady = {e.epoch for e in t.steady_epochs()}
    if t.steps is not None and t.steps.num_rows and steady:
        return sum(1 for e in column(t.steps, "epoch") if int(e) in steady) or None
    if t.nvtx_steady_steps:
        return t.nvtx_steady_steps
    batch = Known.of(t.record.workload).batch
    if t.epochs and batch is not None:  # steps counted from images need the batch (an import may not record it)
        batch = max(1, batch)
        return sum(-(-e.images // batch) for e in t.steady_epochs())
    return None


@rule(ALLOCATOR_CHURN)
def allocator_churn(t: RunTables) -> Verdict:
    name, title = ALLOCATOR_CHURN
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
                   knob(t.record, Tuning.ALLOCATOR))  # fmt: skip


@rule(LAUNCH_BOUND)
def launch_bound(t: RunTables) -> Verdict:
    """From a CUDA trace: launch API time against the kernels' own time, and how many launches a step
    issues. Without a trace it says what host-bound read from the steps table and NVML."""
    name, title = LAUNCH_BOUND
    if not t.cuda_whole or t.kernel_count == 0 or t.kernel_median_ns is None:
        host = host_bound(t)
        seen = f"; host-bound, from the steps table and NVML: {host.state}" if host.measured else ""
        return not_measured(
            name, title, f"no CUDA API and kernel trace to count launches (--trace nsys or cupti){seen}"
        )
    launch_ns, launches = _total(t.cuda_whole, LAUNCH_CALLS)
    ratio = launch_ns / t.kernel_total_ns if t.kernel_total_ns else 0.0
    median_us = t.kernel_median_ns / 1e3
    steps = steady_steps(t)
    per_step = _total(t.cuda_steady, LAUNCH_CALLS)[1] / steps if t.cuda_steady and steps else None
    evidence = (
        Evidence("launch calls", float(launches), ""),
        Evidence("launches per steady step", per_step, ""),
        Evidence("launch API time", launch_ns / 1e6, "ms"),
        Evidence("kernel time", t.kernel_total_ns / 1e6, "ms"),
        Evidence("kernels", float(t.kernel_count), ""),
        Evidence("median kernel", median_us, "µs"),
    )
    if ratio < th.LAUNCH_TO_KERNEL_RATIO or median_us >= th.SHORT_KERNEL_US:
        return quiet(name, title, "kernels run long enough to hide their launches", ratio,
                     "launch time / kernel time", th.LAUNCH_TO_KERNEL_RATIO, evidence)  # fmt: skip
    each = f", {per_step:.0f} launches a step" if per_step is not None else ""
    return Verdict(name, title, True, True, Severity.MEDIUM,
                   f"launching takes {ratio_text(ratio)} the kernels' own time{each}, median kernel {median_us:.1f} µs",
                   ratio, "launch time / kernel time", th.LAUNCH_TO_KERNEL_RATIO, evidence,
                   join(larger_batch(t.record), knob(t.record, Tuning.LAUNCH, "fewer, larger kernels")))  # fmt: skip
