"""Entry point of the training child process: `python -m tracer.worker RUN_DIR`.

Exit codes: 0 trained, 1 the framework raised, 3 the framework could not be imported,
4 the in-process tracer asked for by TRACER_TRACE (cupti, torch) could not start, 5 the loss diverged
(NaN or infinite) and --on-divergence is stop.
Every outcome is also an event in `events.jsonl`, so the tracer knows why even if stderr is noisy.
"""

import os
import platform
import signal
import sys
import time
import traceback
from typing import Any, Dict, List, Optional

from tracer.worker import lifeline
from tracer.worker.base import Diverged
from tracer.worker.ranks import CollectiveLog, RankEnv
from tracer.worker.reporting import Reporter, StepLog
from tracer.worker.schema import (
    COLLECTIVES_TABLE,
    EVENTS_FILE,
    EXIT_DIVERGED,
    NATIVE_TRACE,
    NSYS_WINDOW_TRACE,
    SAMPLES_DIR,
    STEPS_TABLE,
    TRACE_CUPTI,
    TRACE_ENV,
    TRACE_TORCH,
    WORKER_CONFIG_FILE,
    WORKER_PID_FILE,
    Event,
)
from tracer.worker.window import Gate, NvtxCapture
from tracer.worker.workload import WorkloadConfig, list_images

EXIT_FRAMEWORK_ERROR = 1
EXIT_IMPORT_ERROR = 3
EXIT_TRACE_ERROR = 4
LEAK_MIB_PER_EPOCH = 200
_leaked = []  # type: List[bytes]


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tracer.worker RUN_DIR", file=sys.stderr)
        return 2
    run_dir = args[0]
    lifeline.install()
    os.umask(os.umask(0o022) | 0o022)  # nsys starts it with umask 0: no world-writable run files
    cfg = WorkloadConfig.load(os.path.join(run_dir, WORKER_CONFIG_FILE))
    with open(os.path.join(run_dir, WORKER_PID_FILE), "w") as f:
        f.write(str(os.getpid()))
    reporter = Reporter(os.path.join(run_dir, EVENTS_FILE))
    reporter.emit(
        Event.START,
        pid=os.getpid(),
        python=sys.executable,
        python_version=platform.python_version(),
        framework=cfg.framework,
    )
    gate = Gate(cfg.trace_window, reporter)
    trace = None
    try:
        trace = _make_trace(run_dir, cfg, reporter)
        if trace is not None:
            gate.add(trace)
        gate.run_start()  # a whole-run window starts its tracer now
    except BaseException as e:  # noqa: BLE001 - a tracer that cannot start is a result to record
        message = "cannot start --trace %s: %s: %s" % (os.environ.get(TRACE_ENV), type(e).__name__, e)
        print(message, file=sys.stderr)
        reporter.emit(Event.ERROR, error=message, stage="trace")
        reporter.close()
        return EXIT_TRACE_ERROR
    try:
        return _train(cfg, reporter, os.path.join(run_dir, SAMPLES_DIR, STEPS_TABLE + ".csv"), gate)
    finally:
        gate.run_end()
        _stop_trace(trace, reporter)
        reporter.close()


def _make_trace(run_dir: str, cfg: WorkloadConfig, reporter: Reporter) -> Optional[object]:
    """The in-process tracer asked for by the tracer's backend through TRACER_TRACE, not yet started:
    the trace window's gate starts it (at once for a whole-run window)."""
    kind = os.environ.get(TRACE_ENV, "")
    raw_dir = os.path.join(run_dir, "raw")
    if kind == TRACE_CUPTI:
        from tracer.worker import cupti_trace

        return cupti_trace.CuptiCollector(os.path.join(raw_dir, "cupti"), reporter)
    if kind == TRACE_TORCH:
        from tracer.worker import torch_trace

        return torch_trace.TorchTrace(raw_dir, reporter, cfg.device)
    if kind == NATIVE_TRACE:
        from tracer.worker import native_trace

        return native_trace.make(raw_dir, reporter, cfg.framework, cfg.device)
    return None


def _stop_trace(trace: Optional[object], reporter: Reporter) -> None:
    """A trace that fails to stop loses the trace, not the training: `trace_error`, not `error`."""
    if trace is None:
        return
    try:
        trace.stop()  # type: ignore[attr-defined]
    except BaseException as e:  # noqa: BLE001
        traceback.print_exc()
        reporter.emit(Event.TRACE_ERROR, error="%s: %s" % (type(e).__name__, e))


def _train(cfg: WorkloadConfig, reporter: Reporter, steps_path: str, gate: Gate) -> int:
    try:
        from tracer.worker.registry import load_trainer

        trainer_cls = load_trainer(cfg)
    except ImportError as e:
        message = "cannot import the %s framework in %s: %s" % (cfg.framework, sys.executable, e)
        print(message, file=sys.stderr)
        reporter.emit(Event.ERROR, error=message, stage="import")
        return EXIT_IMPORT_ERROR
    trainer = None
    try:
        images = list_images(cfg.dataset_dir, cfg.limit)
        reporter.emit(Event.DATASET, images=images.total_in_folder, images_used=len(images), classes=images.classes)
        trainer = trainer_cls(cfg, images, reporter)
        ranks = RankEnv.from_environ()
        trainer.step_log = StepLog(steps_path, ranks.rank)
        if ranks.world_size > 1:
            trainer.collective_log = CollectiveLog(
                os.path.join(os.path.dirname(steps_path), COLLECTIVES_TABLE + ".csv"), ranks.rank
            )
        trainer.window = gate
        if os.environ.get(TRACE_ENV) == NSYS_WINDOW_TRACE:
            gate.add(NvtxCapture(lambda: trainer.nvtx))
        reporter.emit(Event.VERSIONS, versions=trainer.versions())
        reporter.emit(Event.PHASE, name="build")
        params = trainer.build()
        reporter.emit(Event.MODEL, trainable_params=params.trainable, total_params=params.total, knobs=_knobs(trainer))
        trainer.prepare_data()  # --data memory decodes the set here: its own phase, before the first epoch
        for epoch in range(1, cfg.epochs + 1):
            gate.epoch_start(epoch)  # before the epoch's own event: starting a tracer is not the epoch's time
            reporter.emit(Event.EPOCH_START, epoch=epoch, images_total=len(images), epochs=cfg.epochs)
            _inject_fault(cfg.inject_fault, epoch)
            with trainer.nvtx.range("epoch %d" % epoch):
                stats = trainer.train_epoch(epoch)
            peak = trainer.device_memory_peak()
            reporter.emit(
                Event.EPOCH_END,
                epoch=epoch,
                images=stats.images,
                loss=stats.loss,
                accuracy=stats.accuracy,
                device_peak_mib=peak.mib,
                device_peak_source=peak.source,
            )
            gate.epoch_end(epoch)
            trainer.check_loss(stats.loss, epoch, None, stats.images)  # a sum that overflowed
        trainer.finish()
        reporter.emit(Event.END)
        return 0
    except Diverged:
        return EXIT_DIVERGED  # its `diverged` event is written; steps and samples so far are kept
    except BaseException as e:  # noqa: BLE001 - any framework failure is a result to record
        lines = traceback.format_exception(type(e), e, e.__traceback__)
        sys.stderr.write("".join(lines))
        sys.stderr.flush()
        reporter.emit(Event.ERROR, error="%s: %s" % (type(e).__name__, e), stage="train", traceback=lines[-8:])
        if isinstance(e, KeyboardInterrupt):
            return 130
        return EXIT_FRAMEWORK_ERROR
    finally:
        if trainer is not None and trainer.step_log is not None:
            trainer.step_log.close()
        if trainer is not None and trainer.collective_log is not None:
            trainer.collective_log.close()


def _knobs(trainer: Any) -> Dict[str, object]:
    """The loader budget and pipeline under their shared names, then the framework's own settings."""
    knobs = trainer.loader_knobs()
    knobs.update(trainer.data_knobs())
    knobs.update(trainer.knobs())
    return knobs


def _inject_fault(fault: Optional[str], epoch: int) -> None:
    """Deliberate failures for tests of failure handling and diagnosis: `KIND@EPOCH[:RANK]`, KIND in
    raise|abort|segv|hang|stall|leak (leak: at that epoch and every later one, LEAK_MIB_PER_EPOCH of written
    bytes are appended to a list that is never emptied, as a cache that never evicts does; stall: the
    worker forks a child and both wait for ever, idle, as a hung data loader does)."""
    if not fault:
        return
    kind, _, at = fault.partition("@")
    at, _, only_rank = at.partition(":")  # KIND@EPOCH:RANK: only that rank of a --nproc run fails
    if only_rank and int(only_rank) != RankEnv.from_environ().rank:
        return
    if kind == "leak" and epoch >= int(at or 1):
        _leaked.append(b"x" * (LEAK_MIB_PER_EPOCH << 20))  # written, so resident
        return
    if int(at or 1) != epoch:
        return
    if kind == "raise":
        raise RuntimeError("injected fault at epoch %d" % epoch)
    if kind == "abort":
        sys.stderr.write("injected abort at epoch %d\n" % epoch)
        sys.stderr.flush()
        os.abort()
    if kind == "segv":
        sys.stderr.write("injected segfault at epoch %d\n" % epoch)
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "hang":
        while True:
            time.sleep(1)
    if kind == "stall":  # as a hung input pipeline: the worker and a loader-like child both wait, idle
        if os.fork() == 0:
            while True:
                time.sleep(1)
        while True:
            time.sleep(1)
