"""The trace window inside the worker (`--trace-window`): tracers start at its first epoch or step and
stop after its last, so a long run is traced only where asked; the sampler outside sees all of it.
Without a window (None) the tracers run from the start to the end of the worker, as before windows.

The gate is told where the training is (`run_start`, `epoch_start`/`epoch_end`, `step_start`/`step_end`,
`run_end`) and starts and stops the tracers it holds at the window's edges: the PyTorch profiler and
the CUPTI collector (their `start`/`stop`), and for nsys an NVTX range that nsys's capture range
(`--capture-range=nvtx`) starts and ends collection on. Each edge is a `trace_window` event: `open`
once tracing runs, `close` just before it stops; the tracer's py-spy follows them.

An epoch window opens before the epoch's `epoch_start` event and closes after its `epoch_end`, so what
starting and stopping a tracer costs stays out of the epoch's time. Python 3.6 syntax, standard
library only.
"""

import traceback
from typing import Any, Callable, Dict, List, Optional

from tracer.worker.schema import NVTX_WINDOW_RANGE, WINDOW_CLOSE, WINDOW_EDGE, WINDOW_OPEN, Event

BEFORE, OPEN, DONE = "before", "open", "done"


class Gate(object):
    def __init__(self, bounds: Optional[Dict[str, Optional[int]]], reporter: Any) -> None:
        """`bounds` as `tracer.core.window.TraceWindow.worker_bounds` gives them; None: the whole run."""
        self.bounds = bounds
        self.reporter = reporter
        self.tracers: List[Any] = []
        self.state = BEFORE
        self._steps_seen = -1

    def add(self, tracer: Any) -> None:
        """A tracer with `start()` and `stop()`; one added while the window is open starts at once."""
        self.tracers.append(tracer)
        if self.state == OPEN:
            self._start(tracer, raise_errors=False)

    @property
    def _first_step(self) -> Optional[int]:
        return self.bounds.get("first_step") if self.bounds else None

    def run_start(self) -> None:
        """A whole-run window opens here; a tracer that cannot start then fails the run (exit 4)."""
        if self.bounds is None:
            self._open(raise_errors=True)

    def epoch_start(self, epoch: int) -> None:
        if self.bounds is not None and self._first_step is None and epoch == self.bounds["first_epoch"]:
            self._open()

    def epoch_end(self, epoch: int) -> None:
        if self.bounds is None or epoch != self.bounds["last_epoch"]:
            return
        if self.state == BEFORE and self._first_step is not None:
            self._trace_error(
                "--trace-window %d:%s-%s: epoch %d has steps 0-%d only, nothing was traced"
                % (epoch, self._first_step, self.bounds["last_step"], epoch, self._steps_seen)
            )
            self.state = DONE
        self.close()

    def step_start(self, epoch: int, step: int) -> bool:
        """True when the window opened here (the step's timer restarts after the tracers started)."""
        if self._first_step is None or self.bounds is None or epoch != self.bounds["first_epoch"]:
            return False
        self._steps_seen = step
        if step == self._first_step:
            self._open()
            return True
        return False

    def step_end(self, epoch: int, step: int) -> None:
        if self._first_step is not None and self.bounds is not None and epoch == self.bounds["first_epoch"]:
            if step == self.bounds["last_step"]:
                self.close()

    def run_end(self) -> None:
        self.close()

    def close(self) -> None:
        """Stops every tracer (idempotent); a run that ends inside its window closes it here."""
        if self.state != OPEN:
            return
        self.state = DONE
        if self.bounds is not None:  # a whole-run "window" has no edges to tell
            self.reporter.emit(Event.TRACE_WINDOW, **{WINDOW_EDGE: WINDOW_CLOSE})
        for tracer in self.tracers:
            try:
                tracer.stop()
            except BaseException as e:  # noqa: BLE001 - a tracer that fails to stop loses its trace, not the run
                traceback.print_exc()
                self._trace_error("%s: %s" % (type(e).__name__, e))

    def _open(self, raise_errors: bool = False) -> None:
        if self.state != BEFORE:
            return
        self.state = OPEN
        for tracer in list(self.tracers):
            self._start(tracer, raise_errors)
        if self.bounds is not None:
            self.reporter.emit(Event.TRACE_WINDOW, **{WINDOW_EDGE: WINDOW_OPEN})

    def _start(self, tracer: Any, raise_errors: bool) -> None:
        try:
            tracer.start()
        except BaseException as e:  # noqa: BLE001 - later in a run, a tracer that cannot start loses its trace only
            if raise_errors:
                raise
            traceback.print_exc()
            self.tracers.remove(tracer)
            self._trace_error("cannot start the trace at the window: %s: %s" % (type(e).__name__, e))

    def _trace_error(self, message: str) -> None:
        self.reporter.emit(Event.TRACE_ERROR, error=message)


class NvtxCapture(object):
    """nsys's side of the window: one NVTX range around it, named NVTX_WINDOW_RANGE, which
    `nsys profile --capture-range=nvtx` starts and stops collecting on. Needs an NVTX library in the
    worker's interpreter (`tracer/worker/nvtx.py` says where it looks)."""

    def __init__(self, nvtx: Callable[[], Any]) -> None:
        """`nvtx()` gives the trainer's `Nvtx` when the window opens (a framework may set its own in build)."""
        self.nvtx = nvtx
        self._open = False

    def start(self) -> None:
        nvtx = self.nvtx()
        if not nvtx.enabled:
            raise RuntimeError(
                "no NVTX library in this interpreter (libnvToolsExt or NVIDIA's nvidia-nvtx wheel): "
                "nsys's capture range cannot start, so nothing is traced"
            )
        nvtx.push(NVTX_WINDOW_RANGE)
        self._open = True

    def stop(self) -> None:
        if self._open:
            self._open = False
            self.nvtx().pop()
