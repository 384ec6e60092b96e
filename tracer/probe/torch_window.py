"""`tracer profile --trace torch -- COMMAND`: the PyTorch profiler in each process of the command that
trains with torch, over the trace window, so a user's script gets the operator and kernel tables the
built-in workload gets.

The same parts as the built-in worker's, loaded from its files (`names.worker_module`): its trace
window's gate (tracer/worker/window.py) and its profiler (tracer/worker/torch_trace.py), the window's
bounds from TRACE_WINDOW_ENV (unset: the whole run). The probe tells the gate where the training is
at each step's boundary (`boundary`: the step `step` of epoch `epoch` is about to begin) and at each
epoch's end; starting and stopping the profiler happens there, outside every step's time. A whole-run
window opens at the first step's boundary (a process that never trains, torchrun's launcher or a
loader worker, writes no trace) and closes at exit. Each rank writes its own trace
(TORCH_RANK_TRACE), a single process TORCH_TRACE, where the built-in run's goes.
"""

import atexit
import json
import os

from .names import schema, worker_module


class _Profiler(object):
    """The worker's TorchTrace, made when the window opens (torch.profiler imported only then)."""

    def __init__(self, recorder):
        self.rec = recorder
        self.trace = None  # type: object

    def start(self):  # type: () -> None
        rec = self.rec
        traces = worker_module("dltracer_probe_torch_trace", "torch_trace.py")
        name = schema.TORCH_RANK_TRACE % rec.rank if rec.world_size > 1 else schema.TORCH_TRACE
        raw = os.path.join(rec.run_dir, "raw")
        self.trace = traces.TorchTrace(raw, rec, "gpu", name)  # CUDA activities where torch sees a GPU
        self.trace.start()
        atexit.register(self.stop)  # after torch's own exit handlers were registered: runs before them

    def stop(self):  # type: () -> None
        if self.trace is not None:
            self.trace.stop()


class TorchWindow(object):
    """The gate of one process, driven by the recorder's step boundaries and epoch ends."""

    def __init__(self, recorder, bounds):
        window = worker_module("dltracer_probe_window", "window.py")
        self.gate = window.Gate(bounds, recorder)
        self.gate.add(_Profiler(recorder))
        self.started = False

    def boundary(self, epoch, step):  # type: (int, int) -> bool
        """Step `step` (from 0) of epoch `epoch` is about to begin; True where the profiler started or
        stopped here (the caller then reads its clock again: that time is no step's)."""
        gate = self.gate
        before = gate.state
        if not self.started:
            self.started = True
            try:
                gate.run_start()
            except Exception as e:  # noqa: BLE001 - a profiler that cannot start loses its trace, not the run
                gate.reporter.emit(schema.Event.TRACE_ERROR, error="--trace torch: %s: %s" % (type(e).__name__, e))
        if step > 0:
            gate.step_end(epoch, step - 1)
        else:
            gate.epoch_start(epoch)
        gate.step_start(epoch, step)
        return gate.state != before

    def epoch_ended(self, epoch, steps):  # type: (int, int) -> None
        if steps:
            self.gate.step_end(epoch, steps - 1)
        self.gate.epoch_end(epoch)

    def close(self):  # type: () -> None
        self.gate.run_end()


def install(recorder):
    """The gate of this process where the command runs under `--trace torch`, else nothing."""
    if os.environ.get(schema.TRACE_ENV) != schema.TRACE_TORCH:
        return
    text = os.environ.get(schema.TRACE_WINDOW_ENV)
    try:
        bounds = json.loads(text) if text else None
    except ValueError:
        bounds = None
    recorder.torch_window = TorchWindow(recorder, bounds)
