"""The small interface every framework's worker module implements.

A framework module defines `class Trainer(base.Trainer)`; `tracer.worker.main` drives it:
`versions()`, then `build()` (the prologue every framework shares, then the framework's
`build_training()`: model, optimiser, input pipeline), `prepare_data()` (--data memory and synthetic,
memory_data.DataModes), then `train_epoch()` per epoch. Its models live apart, in
`tracer.worker.models.<framework>`.
"""

import abc
import math
import os
import random
import time
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple, Union

import numpy as np

from tracer.worker.clock import time_ns as wall_ns
from tracer.worker.memory_data import DataModes, MemorySet
from tracer.worker.models import ParamCount
from tracer.worker.nvtx import Nvtx
from tracer.worker.reporting import Reporter, StepLog
from tracer.worker.schema import AUTOTUNE, ON_DIVERGENCE, PIPELINES, Event, nonfinite_name
from tracer.worker.window import Gate
from tracer.worker.workload import ImageList, WorkloadConfig

__all__ = ["Diverged", "EpochStats", "MemoryPeak", "ParamCount", "Trainer"]


class EpochStats(NamedTuple):
    images: int
    loss: float
    accuracy: Optional[float] = None  # share of correct predictions over the steps read; None: not known


class MemoryPeak(NamedTuple):
    """The framework's own figure of device memory in use at its peak since the run began (what the
    model needed, unlike NVML's process memory, which holds what the allocator reserved)."""

    mib: Optional[float]
    source: str  # the call it came from, or "not measured: why"


class Diverged(Exception):
    """The loss became NaN or infinite and --on-divergence is stop: the run ends as `diverged`."""


ON_DIVERGENCE_STOP, ON_DIVERGENCE_CONTINUE = ON_DIVERGENCE


MAX_DEFAULT_WORKERS = 8
DEFAULT_PREFETCH = 2  # batches ready ahead per loader worker: torch's and paddle's prefetch_factor default
DEFAULT_SYNC_EVERY_GPU = 20
SHARED_DECODER = "PIL.Image.open (libjpeg)"
SHARED_RESIZE = "PIL bilinear (antialiased), shorter side, centre crop"


def machine_cores() -> int:
    """The cores this process may run on (affinity, as in a container), else all of them."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_loader_workers() -> int:
    """The one loader budget for every framework: min(cores - 1, 8), leaving a core to the training loop."""
    return max(0, min(machine_cores() - 1, MAX_DEFAULT_WORKERS))


class Trainer(DataModes, abc.ABC):
    # What the framework's native pipeline decodes and resizes with, for run.json (pipeline native).
    NATIVE_DECODER = ""
    NATIVE_RESIZE = ""
    # The framework's call for its peak device memory in use ("" where it has none), for MemoryPeak.
    PEAK_MEMORY_SOURCE = ""
    # What --amp computes in, by device ({}: the framework refuses --amp, in its `check_knobs`).
    AMP_DTYPES: Dict[str, str] = {"gpu": "float16", "cpu": "bfloat16"}
    # --gpu-thread-mode's values where the framework has the setting (TensorFlow's alone).
    GPU_THREAD_MODES: Tuple[str, ...] = ()

    def __init__(self, cfg: WorkloadConfig, images: ImageList, reporter: Reporter) -> None:
        self.cfg = cfg
        self.images = images
        self.reporter = reporter
        self.nvtx = Nvtx()
        self.step_log: Optional[StepLog] = None
        self.collective_log: Optional[Any] = None  # a --nproc rank's CollectiveLog (tracer/worker/ranks.py)
        self.window = Gate(None, reporter)  # the run's trace window (tracer/worker/window.py); main sets it
        self.last_finite_loss: Optional[float] = None
        self.diverged = False
        self.device: Any = None  # the framework's device (or context) that `use_device` picks
        # What --amp computes in here (None without --amp); a refused --amp is `check_knobs`' to say.
        self.amp_dtype: Optional[str] = self.AMP_DTYPES.get(cfg.device) if cfg.amp else None
        self.memory_set: Optional[MemorySet] = None
        self.synthetic_cache: Dict[int, Any] = {}  # --data synthetic: the device batch of each step size

    @abc.abstractmethod
    def versions(self) -> Dict[str, str]:
        """Framework and key package versions, for run.json."""

    def build(self) -> ParamCount:
        """The prologue every framework shares, in the order each needs it (threads before the framework
        starts its runtime; the device before any tensor; seeds on the chosen device), then the
        framework's `build_training()`."""
        cfg = self.cfg
        self.check_knobs()
        threads = cfg.threads or self.default_threads()
        if threads:
            self.set_threads(threads)
        if cfg.device == "gpu":
            missing = self.gpu_missing()
            if missing:
                raise RuntimeError("--device gpu, but %s" % missing)
        self.use_device(cfg.device == "gpu")
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        self.seed(cfg.seed)
        return self.build_training()

    def check_knobs(self) -> None:
        """Refuses, in one line, a setting the framework does not have; frameworks add their own."""
        cfg = self.cfg
        if cfg.gpu_thread_mode and not self.GPU_THREAD_MODES:
            raise ValueError("--gpu-thread-mode is a TensorFlow setting; %s has no equivalent" % cfg.framework)
        if cfg.threads is not None and cfg.threads < 1:
            raise ValueError("--threads %d: give at least 1" % cfg.threads)

    def default_threads(self) -> Optional[int]:
        """Intra-op threads without --threads (None: the framework's own default)."""
        return None

    @abc.abstractmethod
    def set_threads(self, threads: int) -> None:
        """Sets the framework's intra-op threads (before its runtime starts)."""

    @abc.abstractmethod
    def gpu_missing(self) -> str:
        """Why the framework sees no GPU, in its own words ("" where it sees one)."""

    @abc.abstractmethod
    def use_device(self, gpu: bool) -> None:
        """Sets `self.device` to the framework's GPU (or CPU) and makes it the framework's default."""

    @abc.abstractmethod
    def seed(self, seed: int) -> None:
        """Seeds the framework's own generators (Python's and NumPy's are seeded already)."""

    @abc.abstractmethod
    def build_training(self) -> ParamCount:
        """Builds model, loss, optimiser and the framework's native input pipeline; their counts."""

    @abc.abstractmethod
    def train_epoch(self, epoch: int) -> EpochStats:
        """One pass over the images; calls `self.reporter.step(...)` after every batch and wraps
        each step in `self.nvtx.range("step N")`."""

    def _loader_workers(self) -> Union[int, str]:
        """--workers (an int, or "autotune" where the framework has it), else the machine's default budget."""
        workers = self.cfg.workers
        if workers is None:
            return default_loader_workers()
        if workers == AUTOTUNE:
            return AUTOTUNE
        if int(workers) < 0:
            raise ValueError("--workers %s: give 0 or more loader workers (or autotune)" % workers)
        return int(workers)

    def _workers(self) -> int:
        """The loader budget as a worker count; "autotune" is tf.data's alone."""
        workers = self._loader_workers()
        if workers == AUTOTUNE:
            raise ValueError("--workers autotune is tf.data's AUTOTUNE; only TensorFlow has it: give a count")
        return int(workers)

    def _prefetch(self) -> int:
        """Batches ready ahead per loader worker: --prefetch, else 2; 0 with 0 workers (nothing runs ahead)."""
        prefetch = self.cfg.prefetch
        workers = self._loader_workers()
        if workers == 0:
            if prefetch:
                raise ValueError(
                    "--prefetch %d needs --workers >= 1: with 0 workers the loop loads each batch" % prefetch
                )
            return 0
        if prefetch is None:
            return DEFAULT_PREFETCH
        if prefetch < 1:
            raise ValueError("--prefetch %d: give at least 1 batch per loader worker" % prefetch)
        return prefetch

    def _pipeline_kind(self) -> str:
        kind = self.cfg.pipeline or "native"
        if kind not in PIPELINES:
            raise ValueError("--pipeline %s: give one of %s" % (kind, ", ".join(PIPELINES)))
        return kind

    def _sync_every(self) -> int:
        """Steps between loss reads: every step on a CPU (the step is synchronous anyway), every 20 on a GPU."""
        if self.cfg.sync_every is not None:
            if self.cfg.sync_every < 1:
                raise ValueError("--sync-every %d: give at least 1" % self.cfg.sync_every)
            return self.cfg.sync_every
        return DEFAULT_SYNC_EVERY_GPU if self.cfg.device == "gpu" else 1

    def loader_knobs(self) -> Dict[str, object]:
        """The input pipeline and loader budget, under the same names for every framework (run.json knobs)."""
        # A framework without its own image operators (NATIVE_DECODER empty: SINGA) always uses the shared loader.
        native = self._pipeline_kind() == "native" and bool(self.NATIVE_DECODER)
        return {
            "pipeline": "native" if native else "shared",
            "decoder": self.NATIVE_DECODER if native else SHARED_DECODER,
            "resize": self.NATIVE_RESIZE if native else SHARED_RESIZE,
            "loader_workers": self._loader_workers(),
            "prefetch": self._prefetch(),
            "sync_every": self._sync_every(),
        }

    def finish(self) -> None:  # noqa: B027 - a hook: most frameworks hold nothing across processes
        """After the last epoch, before the worker reports its end: release what the framework holds
        across processes (a data-parallel process group), so that no rank's exit breaks another's."""

    def _finish_epoch(self) -> None:  # noqa: B027 - a hook: most frameworks have nothing queued
        """Waits for work still queued on the device at the epoch's end (timed as the last step's sync)."""

    def run_epoch(
        self,
        epoch: int,
        batches: Iterable[Any],
        train_step: Callable[[Any], Tuple[Any, int]],
        read: Callable[[Any], Tuple[float, Optional[float]]],
    ) -> EpochStats:
        """The timed training loop every framework shares.

        `train_step(batch)` dispatches forward, backward and update and returns (outputs, images);
        `read(outputs)` reads the batch's mean loss and its count of correct predictions (None where the
        framework cannot tell) to the host, the host-device synchronisation, every `sync_every` steps
        and after the last: accuracy comes from the logits the step computed anyway, no extra pass.
        Every loss read is checked: the first NaN or infinity is a divergence (`diverged`). Each step
        is timed with monotonic clock reads as data wait (from asking the pipeline for the batch until
        it came: the iterator's creation counts in step 0, the final empty ask and the iterator's
        teardown in the last step), compute and sync, and logged as one row of STEP_COLUMNS."""
        sync_every = self._sync_every()
        images, loss_sum, loss_images = 0, 0.0, 0
        correct_sum, correct_images = 0.0, 0
        rows: List[List[Any]] = []
        start_ns = wall_ns()
        t0 = time.perf_counter()
        iterator = iter(batches)
        step = 0
        unread: Optional[Tuple[Any, int, int]] = None
        try:
            while True:
                if self.window.step_start(epoch, step):  # the tracers started: the step is timed from here
                    start_ns = wall_ns()
                    t0 = time.perf_counter()
                try:
                    batch = next(iterator)
                except StopIteration:
                    break
                t1 = time.perf_counter()
                with self.nvtx.range("step %d" % step):
                    outputs, n = train_step(batch)
                    t2 = time.perf_counter()
                    value: Optional[float] = None
                    correct: Optional[float] = None
                    if (step + 1) % sync_every == 0:
                        value, correct = read(outputs)
                    t3 = time.perf_counter()
                images += n
                if value is None:
                    unread = (outputs, n, step)
                else:
                    unread = None
                    loss_sum += value * n
                    loss_images += n
                    if correct is not None:
                        correct_sum += correct
                        correct_images += n
                self._log_step(rows)
                rows.append([epoch, step, n, start_ns, t1 - t0, t2 - t1, t3 - t2])
                self.reporter.step(epoch, images, value)
                if value is not None:
                    self.check_loss(value, epoch, step, images)
                self.window.step_end(epoch, step)
                step += 1
                start_ns = wall_ns()
                t0 = time.perf_counter()
            del iterator  # its teardown (tf.data joins its threads) is the pipeline's time: the last step's wait
            t_end = time.perf_counter()
            if rows:
                rows[-1][4] += t_end - t0
                last: Optional[float] = None
                if unread is not None:
                    last, correct = read(unread[0])
                    loss_sum += last * unread[1]
                    loss_images += unread[1]
                    if correct is not None:
                        correct_sum += correct
                        correct_images += unread[1]
                self._finish_epoch()
                rows[-1][6] += time.perf_counter() - t_end
                if unread is not None and last is not None:
                    self.check_loss(last, epoch, unread[2], images)
        finally:
            self._log_step(rows, everything=True)  # a divergence or a failure keeps every step timed so far
        accuracy = correct_sum / correct_images if correct_images else None
        return EpochStats(images, loss_sum / max(loss_images, 1), accuracy)

    def check_loss(self, loss: float, epoch: int, step: Optional[int], images: Optional[int]) -> None:
        """Every loss read goes through here. The first non-finite one emits `diverged` (where, the last
        finite loss, the learning rate) and, under --on-divergence stop (the default), raises `Diverged`."""
        if math.isfinite(loss):
            if not self.diverged:
                self.last_finite_loss = loss
            return
        if self.diverged:
            return
        self.diverged = True
        go_on = self.cfg.on_divergence == ON_DIVERGENCE_CONTINUE
        self.reporter.emit(
            Event.DIVERGED,
            epoch=epoch,
            step=step,
            images=images,
            loss=nonfinite_name(loss),
            last_finite_loss=self.last_finite_loss,
            lr=self.cfg.lr,
            continued=go_on,
        )
        if not go_on:
            raise Diverged("loss %s at epoch %d step %s" % (nonfinite_name(loss), epoch, step))

    def _log_step(self, rows: List[List[Any]], everything: bool = False) -> None:
        """Hands finished rows to the step log; the newest stays until the next step (or the end) settles it."""
        keep = 0 if everything else 1
        if self.step_log is not None:
            while len(rows) > keep:
                self.step_log.add(*rows.pop(0))
            if everything:
                self.step_log.flush()
        else:
            del rows[: max(len(rows) - keep, 0)]

    def device_memory_peak(self) -> MemoryPeak:
        """Read at each epoch's end; None with the reason on a CPU, or where the framework has no such figure."""
        if self.cfg.device != "gpu":
            return MemoryPeak(None, "not measured: a CPU run has no device memory")
        if not self.PEAK_MEMORY_SOURCE:
            return MemoryPeak(None, "not measured: %s reports no peak memory in use" % self.cfg.framework)
        try:
            value = self._peak_memory_bytes()
        except Exception as e:  # noqa: BLE001 - a figure missing is a result, not a failed run
            return MemoryPeak(None, "not measured: %s failed: %s: %s" % (self.PEAK_MEMORY_SOURCE, type(e).__name__, e))
        if value is None:
            return MemoryPeak(None, "not measured: %s gave nothing" % self.PEAK_MEMORY_SOURCE)
        return MemoryPeak(value / float(1 << 20), self.PEAK_MEMORY_SOURCE)

    def _peak_memory_bytes(self) -> Optional[float]:
        """Bytes in use at the peak, by PEAK_MEMORY_SOURCE (frameworks that declare one override this)."""
        return None

    def knobs(self) -> Dict[str, object]:
        """The framework settings each CLI knob was mapped to, for run.json."""
        return {}
