"""Rules read from the host side: per-step timing, the sampler's process table, epochs and outcome."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pyarrow as pa

from analyzers.diagnosis import thresholds as th
from analyzers.diagnosis.inputs import RunTables, column, steady_data_wait
from analyzers.diagnosis.knobs import command_input_knobs, join, knob, larger_batch
from analyzers.diagnosis.verdict import Evidence, RuleName, Severity, Verdict, not_measured, quiet, rule
from analyzers.render.marker import marker_advice, wait_not_seen
from tracer.core import schema
from tracer.core.frameworks import FRAMEWORKS, FrameworkInfo, Tuning
from tracer.core.records import RunStatus
from tracer.core.schema import CTX_INVOLUNTARY, DATA_FILES, DATA_MODES

# the rules' names and titles, each declared once (analyzers.diagnosis.verdict.RuleName)
INPUT_BOUND = RuleName("input-bound", "input-bound")
CPU_OVERSUBSCRIPTION = RuleName("cpu-oversubscription", "CPU oversubscribed")
CPU_UNDER_USED = RuleName("cpu-under-used", "CPU under-used")
MEMORY_GROWTH = RuleName("memory-growth", "memory growth")
STARTUP_HEAVY = RuleName("startup-heavy", "start-up heavy")
THREAD_PER_IMAGE = RuleName("thread-per-image", "thread per image")
CRASH = RuleName("crash", "crash or refusal")

GENERIC_WORKERS_KNOB = "loader_workers"  # run.json: the loader budget every worker writes under one name


def _int_knob(t: RunTables, names: tuple[str | None, ...]) -> int | None:
    for name in names:
        value = t.record.knobs.get(name) if name else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _declared(t: RunTables) -> FrameworkInfo | None:
    return FRAMEWORKS.get(t.record.measurement.framework)


def intra_op_threads(t: RunTables) -> int:
    """The intra-op thread count the run used: the framework's own report, else --threads, else the
    cores (every framework's default is one thread per core)."""
    info = _declared(t)
    return _int_knob(t, (info.intra_op_knob if info else None,)) or (t.record.spec and t.record.spec.threads) or t.cores


def loader_workers(t: RunTables) -> int | None:
    """The input pipeline's workers as the run recorded them; None where nothing recorded the setting (an
    imported trace, a loop the probe does not read): never shown as 0."""
    info = _declared(t)
    own = tuple(f"{p}.num_workers" for p in step_probes(t)) if t.record.command is not None else ()
    for name in (GENERIC_WORKERS_KNOB, info.workers_knob if info else None, *own):
        value = t.record.knobs.get(name) if name else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value  # 0 too: a loader without workers, as recorded
    return None


def _float_or_none(value: int | None) -> float | None:
    return None if value is None else float(value)


def step_probes(t: RunTables) -> list[str]:
    """Who saw the run's steps (a command's probe names; `worker` for the built-in workload)."""
    if t.steps is None or schema.PROBE not in t.steps.column_names:
        return []
    return sorted(str(p) for p in t.steps.column(schema.PROBE).unique().to_pylist() if p)


@rule(INPUT_BOUND)
def input_bound(t: RunTables) -> Verdict:
    name, title = INPUT_BOUND
    if t.steps is None or t.steps.num_rows == 0:
        if t.record.command is not None:  # a user's loop the probe did not see: the two lines to add
            return not_measured(name, title, marker_advice(t.record.measurement.framework))
        return not_measured(name, title, "the run has no per-step timing (samples/steps; runs before issue 18)")
    wait = steady_data_wait(t)
    if wait is None and t.steps.column(schema.DATA_WAIT_S).null_count:
        return not_measured(name, title, wait_not_seen(step_probes(t)))
    if wait is None:
        return not_measured(name, title, "the per-step times are all zero")
    share = wait.share_pct
    evidence: tuple[Evidence, ...] = (
        Evidence("data wait", wait.wait_s, "s"),
        Evidence("data wait per epoch", wait.wait_s / wait.epochs, "s"),
        Evidence("step time", wait.step_s, "s"),
        Evidence("steps", float(wait.steps), ""),
        Evidence("loader workers", _float_or_none(loader_workers(t)), ""),
    )
    if t.gpu is not None:
        util = column(t.in_epochs(t.gpu, t.steady_epochs()), schema.UTIL_PCT)
        if util:
            evidence += (Evidence("GPU utilisation while training", statistics.fmean(util), "%"),)
    if share <= th.INPUT_BOUND_PCT:
        return quiet(name, title, "data wait is a small share of step time", share, "% of step time",
                     th.INPUT_BOUND_PCT, evidence)  # fmt: skip
    severity = Severity.HIGH if share > th.INPUT_BOUND_HIGH_PCT else Severity.MEDIUM
    spec = t.record.spec
    finding = f"steps wait for their batch {share:.0f} % of the time"
    paired = t.pair.sentence() if t.pair is not None else ""
    if paired:  # a run beside it differing only in --data measured what the pipeline costs
        finding += f"; {paired}"
        evidence += _pair_evidence(t)
    advice = join(knob(t.record, Tuning.WORKERS, "more loader workers"),
                  knob(t.record, Tuning.PREFETCH, "deeper prefetch"),
                  "or a smaller image pipeline (--image-size)")  # fmt: skip
    if spec is not None and spec.data != DATA_FILES:  # batches from memory: no loader workers or prefetch to give
        advice = larger_batch(t.record, "fewer, larger batches to index and copy from memory")
    if t.record.command is not None:  # the user's own script: its pipeline's settings, not the tracer's flags
        advice = command_input_knobs(step_probes(t), t.record.knobs) or "overlap loading with the steps"
    return Verdict(name, title, True, True, severity, finding, share, "% of step time", th.INPUT_BOUND_PCT,
                   evidence, advice)  # fmt: skip


def _pair_evidence(t: RunTables) -> tuple[Evidence, ...]:
    """The paired runs' steady throughput, one number per data mode that has one."""
    assert t.pair is not None
    rates = ((m, t.pair.rate(m)) for m in DATA_MODES)
    return tuple(Evidence(f"images/s fed from {m} (paired run)", r, "img/s") for m, r in rates if r is not None)


@rule(CPU_OVERSUBSCRIPTION)
def oversubscription(t: RunTables) -> Verdict:
    name, title = CPU_OVERSUBSCRIPTION
    table = t.in_epochs(t.process, list(t.epochs))
    if table is None or table.num_rows < 2 or CTX_INVOLUNTARY not in table.column_names:
        return not_measured(name, title, "no context-switch samples in the epochs (runs before this column)")
    times = column(table, "t_ns")
    invol = column(table, CTX_INVOLUNTARY)
    switches = sum(max(0.0, b - a) for a, b in zip(invol, invol[1:]))  # processes that exit lower the sum
    seconds = (times[-1] - times[0]) / 1e9
    if seconds <= 0:
        return not_measured(name, title, "the epochs hold one sample")
    rate = switches / seconds / t.cores
    threads = intra_op_threads(t) + (loader_workers(t) or 0)
    per_core = threads / t.cores
    busy = statistics.fmean(column(table, schema.CPU_CORES)) if column(table, schema.CPU_CORES) else None
    others = _others_pct(table)
    # per second of a core the run actually held: on a machine others keep busy the run's threads run
    # little, and so are preempted little per wall second however many of them compete
    running = switches / seconds / busy if busy else None
    per_image = None
    images = sum(e.images for e in t.epochs)
    if busy and images:
        cpu_s = busy * sum(e.duration_s for e in t.epochs)
        per_image = cpu_s / images
    evidence = (
        Evidence("involuntary context switches", rate, "/s per core"),
        Evidence("intra-op + loader threads", float(threads), ""),
        Evidence("logical cores", float(t.cores), ""),
        Evidence("busy cores", busy, "cores"),
        Evidence("CPU time per image", per_image, "s"),
        Evidence("other processes' CPU", others, "% of all cores"),
        Evidence("involuntary context switches per busy core", running, "/s"),
    )
    over_threads = per_core > th.OVERSUB_THREADS_PER_CORE
    # Preemption does not say by whom: where other processes took a share of the cores (the sampler
    # measures the whole machine), only a thread count well above the cores is the run's own doing.
    loaded = others is not None and others > th.OVERSUB_OTHERS_PCT
    over_switches = rate > th.OVERSUB_INVOLUNTARY_PER_CORE_S or (
        loaded and running is not None and running > th.OVERSUB_INVOLUNTARY_PER_CORE_S
    )
    own = per_core > th.OVERSUB_OWN_THREADS_PER_CORE or (over_threads and not loaded)
    alone = th.OVERSUB_SWITCHES_ALONE * th.OVERSUB_INVOLUNTARY_PER_CORE_S  # switches enough without a thread excess
    fired = (own and over_switches) or (not loaded and rate > alone)
    if not fired:
        said = f"{threads} threads on {t.cores} cores, few forced switches"
        if loaded and over_switches:
            said = (
                f"{threads} threads on {t.cores} cores, preempted {rate:.0f} times a second per core while other"
                f" processes took {others:.0f} % of the cores: the machine's load, not the run's threads"
            )
        return quiet(name, title, said, rate, "switches/s per core", th.OVERSUB_INVOLUNTARY_PER_CORE_S,
                     evidence)  # fmt: skip
    why = f"{threads} threads on {t.cores} cores" if own else "threads beyond its intra-op and loader ones"
    return Verdict(name, title, True, True, Severity.HIGH if own else Severity.MEDIUM,
                   f"threads are preempted {rate:.0f} times a second per core ({why})", rate,
                   "switches/s per core", th.OVERSUB_INVOLUNTARY_PER_CORE_S, evidence,
                   knob(t.record, Tuning.THREADS, f"at most {t.cores} intra-op threads"))  # fmt: skip


def _others_pct(table: pa.Table | None) -> float | None:
    """Mean CPU of every other process on the machine in `table`'s samples, in % of all cores."""
    machine, run = column(table, schema.SYS_CPU_PCT), column(table, schema.CPU_PCT)
    if not machine or len(machine) != len(run):
        return None
    return statistics.fmean(max(0.0, m - r) for m, r in zip(machine, run))


@rule(CPU_UNDER_USED)
def cpu_under_used(t: RunTables) -> Verdict:
    name, title = CPU_UNDER_USED
    if t.record.measurement.device == "gpu":
        return not_measured(name, title, "a GPU run: the operators run on the GPU (input-bound and host-bound "
                                         "say what the host holds up)")  # fmt: skip
    table = t.in_epochs(t.process, t.steady_epochs())
    busy_col = column(table, schema.CPU_CORES)
    if not busy_col:
        return not_measured(name, title, "no process samples in the epochs")
    busy = statistics.fmean(busy_col)
    allowed = min(intra_op_threads(t), t.cores)
    share = 100 * busy / allowed
    machine = column(table, schema.SYS_CPU_PCT)
    others = None
    if machine:
        others = max(0.0, statistics.fmean(machine) - 100 * busy / t.cores)
    wait = steady_data_wait(t)
    evidence = (
        Evidence("busy cores", busy, "cores"),
        Evidence("cores the intra-op threads allow", float(allowed), "cores"),
        Evidence("other processes' CPU", others, "% of all cores"),
        Evidence("data wait", wait.share_pct if wait else None, "% of step time"),
    )
    if share >= th.UNDERUSED_CPU_PCT:
        return quiet(name, title, f"{busy:.2f} of {allowed} allowed cores busy", share, "% of allowed cores",
                     th.UNDERUSED_CPU_PCT, evidence)  # fmt: skip
    finding = f"only {busy:.2f} of the {allowed} cores it may use are busy"
    if wait is not None and wait.share_pct > th.INPUT_BOUND_PCT:
        finding += f" (steps wait for data {wait.share_pct:.0f} % of the time)"
        advice = join(knob(t.record, Tuning.WORKERS, "overlap input with compute"), larger_batch(t.record))
    elif others is not None and others > th.UNDERUSED_OTHERS_PCT:
        finding += " (the machine was busy with other work)"
        advice = "running it alone (other processes took the cores)"
    else:
        finding += " (serial Python or I/O between the operators)"
        advice = join(larger_batch(t.record, "larger operators parallelise"),
                      knob(t.record, Tuning.THREADS, "intra-op threads"))  # fmt: skip
    return Verdict(name, title, True, True, Severity.MEDIUM, finding, share, "% of allowed cores",
                   th.UNDERUSED_CPU_PCT, evidence, advice)  # fmt: skip


@rule(MEMORY_GROWTH)
def memory_growth(t: RunTables) -> Verdict:
    """The slope of each later epoch's peak RSS over the epoch index: the first epoch is left out (it
    holds the allocator's and the framework's warm-up growth), so it needs three epochs."""
    name, title = MEMORY_GROWTH
    steady = t.steady_epochs()
    peaks = []
    for part in (t.epoch_parts(t.process, steady) or []) if len(t.epochs) >= 3 else []:
        rss = column(part, schema.RSS_MIB)
        if rss:
            peaks.append(max(rss))
    if len(peaks) < 2:
        return not_measured(name, title, "needs three epochs with RSS samples (the first is warm-up)")
    per_epoch = statistics.linear_regression(range(len(peaks)), peaks).slope
    pct = 100 * per_epoch / statistics.fmean(peaks)
    epoch_s = t.median_epoch_s() or 0.0
    evidence = (
        Evidence("RSS slope per epoch", per_epoch, "MiB/epoch"),
        Evidence("RSS slope share", pct, "% of RSS/epoch"),
        Evidence("RSS slope per second", per_epoch / epoch_s if epoch_s else None, "MiB/s"),
        Evidence("peak RSS of epoch 2", peaks[0], "MiB"),
        Evidence("peak RSS of the last epoch", peaks[-1], "MiB"),
    )
    if per_epoch <= th.MEM_GROWTH_MIB_PER_EPOCH or pct <= th.MEM_GROWTH_PCT_PER_EPOCH:
        return quiet(name, title, "peak RSS is flat after the first epoch", per_epoch, "MiB/epoch",
                     th.MEM_GROWTH_MIB_PER_EPOCH, evidence)  # fmt: skip
    severity = Severity.HIGH if pct > th.MEM_GROWTH_HIGH_PCT_PER_EPOCH else Severity.MEDIUM
    return Verdict(name, title, True, True, severity,
                   f"peak RSS grows {per_epoch:.0f} MiB every epoch ({pct:.0f} % of RSS): a leak or an unbounded cache",
                   per_epoch, "MiB/epoch", th.MEM_GROWTH_MIB_PER_EPOCH, evidence,
                   "look for tensors kept across steps (losses appended without .item()/detach, caches); "
                   "python -X tracemalloc")  # fmt: skip


def startup_share(t: RunTables) -> tuple[float, str] | None:
    """Start-up as a share of the run (the start-up phase of analyzers.figures.phases): the worker's start to
    the first epoch over start to last epoch end; for a trace without epochs (an import), what comes
    before its steady state (start-up and the first, warm-up step) over the CUDA API calls' span."""
    if t.epochs:
        lo, first, hi = t.worker_start_ns, t.epochs[0].start_ns, t.epochs[-1].end_ns
        if hi > lo:
            return 100 * (first - lo) / (hi - lo), "worker start to the first epoch"
    if t.trace_span_ns is not None and t.steady_cut_ns is not None:
        lo, hi = t.trace_span_ns
        if hi > lo and lo <= t.steady_cut_ns <= hi:  # a cut outside the calls' span: the trace missed start-up
            return 100 * (t.steady_cut_ns - lo) / (hi - lo), "CUDA API span before the steady steps"
    return None


@rule(STARTUP_HEAVY)
def startup_heavy(t: RunTables) -> Verdict:
    name, title = STARTUP_HEAVY
    found = startup_share(t)
    if found is None:
        return not_measured(name, title, "no epochs, and no traced steps within the CUDA API calls' span")
    share, basis = found
    ratio = None
    if len(t.epochs) > 1:
        ratio = t.epochs[0].duration_s / (t.median_epoch_s() or math.inf)
    evidence = (
        Evidence(f"start-up share ({basis})", share, "%"),
        Evidence("first epoch / median later epoch", ratio, "x"),
    )
    if share <= th.STARTUP_SHARE_PCT and (ratio is None or ratio <= th.FIRST_EPOCH_RATIO):
        return quiet(name, title, "start-up is a small part of the run", share, "% of run", th.STARTUP_SHARE_PCT,
                     evidence)  # fmt: skip
    parts = [f"start-up takes {share:.0f} % of the run"] if share > th.STARTUP_SHARE_PCT else []
    if ratio is not None and ratio > th.FIRST_EPOCH_RATIO:
        parts.append(f"the first epoch takes {ratio:.1f}x a later one")
    return Verdict(name, title, True, True, Severity.LOW, "; ".join(parts) + " (imports, graph tracing, autotuning)",
                   share, "% of run", th.STARTUP_SHARE_PCT, evidence,
                   join("more epochs, which amortise it", knob(t.record, Tuning.STARTUP)))  # fmt: skip


@rule(THREAD_PER_IMAGE)
def thread_per_image(t: RunTables) -> Verdict:
    name, title = THREAD_PER_IMAGE
    table = t.in_epochs(t.process, list(t.epochs))
    times, threads = column(table, "t_ns"), column(table, "threads")
    if len(threads) < 3:
        return not_measured(name, title, "fewer than three thread samples in the epochs")
    images = images_done(t, times)
    if images[-1] - images[0] <= 0:
        return not_measured(name, title, "no images processed between the samples")
    slope = statistics.linear_regression(images, threads).slope * 100
    growth = max(threads) - threads[0]
    evidence = (
        Evidence("thread slope", slope, "threads/100 images"),
        Evidence("threads gained", growth, "threads"),
        Evidence("threads at the first epoch sample", threads[0], ""),
    )
    if slope <= th.THREADS_PER_100_IMAGES or growth < th.THREAD_GROWTH_MIN:
        return quiet(name, title, "the thread count does not grow with the images", slope, "threads/100 images",
                     th.THREADS_PER_100_IMAGES, evidence)  # fmt: skip
    return Verdict(name, title, True, True, Severity.HIGH,
                   f"{slope:.1f} new threads per 100 images ({growth:.0f} gained): threads started per image",
                   slope, "threads/100 images", th.THREADS_PER_100_IMAGES, evidence,
                   knob(t.record, Tuning.THREADS, "a fixed thread pool"))  # fmt: skip


def images_done(t: RunTables, times_ns: list[float]) -> list[float]:
    """Images processed by each time, linear inside an epoch and flat between epochs."""
    xs, ys, done = [], [], 0.0
    for e in t.epochs:
        xs += [float(e.start_ns), float(e.end_ns)]
        ys += [done, done + e.images]
        done += e.images
    return [float(v) for v in np.interp(times_ns, xs, ys)] if xs else [0.0] * len(times_ns)


@rule(CRASH)
def crash(t: RunTables) -> Verdict:
    name, title = CRASH
    outcome = t.record.outcome
    status = outcome.status.value
    if status in ("ok", "running"):
        return quiet(name, title, f"the run ended {status}", None, "", None)
    cause = own_cause(t)
    evidence: tuple[Evidence, ...] = (
        Evidence("epochs done", float(len(t.epochs)), f"of {t.record.spec.epochs}" if t.record.spec else ""),
        Evidence("exit code", float(outcome.exit_code) if outcome.exit_code is not None else None, ""),
    )
    divergence = outcome.divergence
    if divergence is not None and status == RunStatus.DIVERGED.value:
        evidence += (
            Evidence("diverged at epoch", float(divergence.epoch), ""),
            Evidence("last finite loss", divergence.last_finite_loss, ""),
            Evidence("learning rate", divergence.lr, ""),
        )
        advice = (
            "a smaller --lr (or --amp off, where it is on); the epoch times of a diverged run are not"
            " ranked beside healthy runs (--on-divergence continue still times every epoch)"
        )
        return Verdict(name, title, True, True, Severity.HIGH, divergence.describe(), None, "", None, evidence, advice)
    if outcome.signal == "SIGKILL":
        advice = "a smaller --batch or --image-size (the kernel's out-of-memory killer sends SIGKILL)"
    elif status == "timeout":
        advice = "a longer --timeout, or fewer epochs"
    else:
        advice = "what the framework's message says; a smaller --batch if it ran out of memory"
    return Verdict(name, title, True, True, Severity.HIGH, f"{status}: {cause}", None, "", None, evidence, advice)


def own_cause(t: RunTables) -> str:
    """The framework's own words for why the run stopped, in one line: its error event, else the last
    `SomethingError: ...` line of its output, else the tracer's cause (signal, timeout)."""
    outcome = t.record.outcome
    if t.errors and t.errors[-1]:
        return t.errors[-1].splitlines()[0]
    for line in reversed(outcome.stderr_tail):
        head = line.strip().split(":", 1)[0]
        if head.endswith(("Error", "Exception", "Abort", "abort")) or "injected" in line:
            return line.strip()
    return outcome.cause or outcome.status.value
