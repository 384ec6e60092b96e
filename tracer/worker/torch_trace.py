"""`--trace torch`: the PyTorch profiler (Kineto) around the whole training, exported as a Chrome trace.

Runs inside the PyTorch worker. CPU operators always, CUDA runtime calls and kernels when a GPU is
used. The trace is held by Kineto until the end and written once, gzipped, to `raw/kineto.json.gz`
(the format the analyzers ingest and Perfetto opens). Its cost is reported as a `trace_overhead` event.
A user's command gets the same class from the probe (tracer/probe/torch_window.py), one file per rank.
"""

import os
import time

from tracer.worker.schema import TORCH_TRACE, Event


class TorchTrace:
    def __init__(self, raw_dir, reporter, device, name=TORCH_TRACE):
        import torch
        from torch.profiler import ProfilerActivity, profile

        self.path = os.path.join(raw_dir, name)
        self.reporter = reporter
        self.pid = os.getpid()
        activities = [ProfilerActivity.CPU]
        if device == "gpu" and torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self.activities = [a.name for a in activities]
        self.profiler = profile(activities=activities, record_shapes=False, with_stack=False, profile_memory=False)
        self._running = False

    def start(self):
        self.profiler.__enter__()
        self._running = True

    def stop(self):
        """Stops the profiler and writes the trace (atomically: a temporary name, then renamed)."""
        if os.getpid() != self.pid or not self._running:
            return
        self._running = False
        t0 = time.perf_counter()
        self.profiler.__exit__(None, None, None)
        t1 = time.perf_counter()
        tmp = self.path[: -len(".json.gz")] + ".tmp.json.gz"
        self.profiler.export_chrome_trace(tmp)
        wait = getattr(self.profiler, "wait_for_exports", None)  # newer torch may export asynchronously
        if wait is not None:
            wait()
        os.replace(tmp, self.path)
        t2 = time.perf_counter()
        self.reporter.emit(
            Event.TRACE_OVERHEAD,
            backend="torch",
            activities=self.activities,
            stop_s=t1 - t0,
            export_s=t2 - t1,
            trace_bytes=os.path.getsize(self.path),
        )


def start(raw_dir, reporter, device):
    trace = TorchTrace(raw_dir, reporter, device)
    trace.start()
    return trace
