"""`--trace native`: the framework's own profiler over the trace window, inside the worker.

PyTorch: the PyTorch profiler (`torch_trace`, Kineto JSON). JAX: `jax.profiler.start_trace`. TensorFlow:
`tf.profiler.experimental.start`. Both write an XPlane profile (`<logdir>/plugins/profile/<run>/
<host>.xplane.pb`), moved here to raw/NATIVE_TRACE_FILES[framework]. paddle: `paddle.profiler.Profiler`
on the CPU, exported as its Chrome-trace JSON. MXNet: `mx.profiler` with `profile_all`, dumped as its
Chrome-trace JSON. Each reports what stopping and writing cost as a `trace_overhead` event. Python 3.6
syntax, standard library and the framework only.
"""

import glob
import os
import shutil
import time

from tracer.worker.schema import NATIVE_TRACE, NATIVE_TRACE_FILES, Event


class NativeTrace(object):
    """start() and stop() around the window; the file lands at raw/NATIVE_TRACE_FILES[framework]."""

    def __init__(self, raw_dir, reporter, framework):
        self.raw_dir = raw_dir
        self.reporter = reporter
        self.framework = framework
        self.path = os.path.join(raw_dir, NATIVE_TRACE_FILES[framework])
        self.pid = os.getpid()
        self._running = False
        self._profiler = None

    def start(self):
        getattr(self, "_start_" + self.framework)()
        self._running = True

    def stop(self):
        if os.getpid() != self.pid or not self._running:
            return
        self._running = False
        t0 = time.perf_counter()
        getattr(self, "_stop_" + self.framework)()
        t1 = time.perf_counter()
        self.reporter.emit(
            Event.TRACE_OVERHEAD,
            backend=NATIVE_TRACE,
            profiler=self.framework,
            stop_s=t1 - t0,
            export_s=0.0,
            trace_bytes=os.path.getsize(self.path) if os.path.exists(self.path) else 0,
        )

    # XPlane: jax.profiler and TensorFlow's profiler write a profile folder; its XPlane is kept

    def _logdir(self):
        return os.path.join(self.raw_dir, ".native_profile")

    def _start_jax(self):
        import jax

        options = getattr(jax.profiler, "ProfileOptions", None)
        if options is None:  # older jax: its defaults
            jax.profiler.start_trace(self._logdir())
            return
        chosen = options()
        chosen.python_tracer_level = 0  # every Python call a record (a million in a tiny run): XLA's ops suffice
        jax.profiler.start_trace(self._logdir(), profiler_options=chosen)

    def _stop_jax(self):
        import jax

        jax.profiler.stop_trace()
        self._keep_xplane()

    def _start_tensorflow(self):
        import tensorflow as tf

        tf.profiler.experimental.start(self._logdir())

    def _stop_tensorflow(self):
        import tensorflow as tf

        tf.profiler.experimental.stop()
        self._keep_xplane()

    def _keep_xplane(self):
        found = sorted(glob.glob(os.path.join(self._logdir(), "plugins", "profile", "*", "*.xplane.pb")))
        if not found:
            raise RuntimeError("the profiler wrote no .xplane.pb under %s" % self._logdir())
        os.replace(found[-1], self.path)
        shutil.rmtree(self._logdir(), ignore_errors=True)

    # paddle.profiler and MXNet's profiler: their own Chrome-trace JSON

    def _start_paddle(self):
        import paddle.profiler as profiler

        # on_trace_ready: nothing (its default writes ./profiler_log in the working directory); exported in stop
        self._profiler = profiler.Profiler(targets=[profiler.ProfilerTarget.CPU], on_trace_ready=lambda prof: None)
        self._profiler.start()

    def _stop_paddle(self):
        self._profiler.stop()
        tmp = self.path + ".tmp"
        self._profiler.export(path=tmp, format="json")
        os.replace(tmp, self.path)

    def _start_mxnet(self):
        import mxnet as mx

        mx.profiler.set_config(profile_all=True, aggregate_stats=False, filename=self.path)
        mx.profiler.set_state("run")

    def _stop_mxnet(self):
        import mxnet as mx

        mx.nd.waitall()
        mx.profiler.set_state("stop")
        mx.profiler.dump()


def make(raw_dir, reporter, framework, device):
    """The framework's own profiler, not yet started (the trace window's gate starts it)."""
    if framework == "pytorch":
        from tracer.worker import torch_trace

        return torch_trace.TorchTrace(raw_dir, reporter, device)
    if framework not in NATIVE_TRACE_FILES:
        raise RuntimeError("%s has no profiler of its own for --trace native" % framework)
    return NativeTrace(raw_dir, reporter, framework)
