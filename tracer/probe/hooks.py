"""Where the probe hooks into a framework, each patch applied only when the script imports the module
that defines what it patches (a finder on `sys.meta_path` that watches a handful of names and finds
nothing itself), so a script that imports no framework pays one set lookup per import.

Hooks, by what a training loop does:
- PyTorch: iterating `torch.utils.data.DataLoader` (a `Pass` per `for`, counting only steps with a
  backward or an optimizer step); the tensor given to `backward()` kept to read the loss once at the
  epoch's end; the first `cross_entropy`'s class count (`facts`); under `--trace torch` the profiler
  over the trace window (`torch_window`).
- TensorFlow: `keras.Model.fit` (a callback added; Keras's own logs give the loss; samples from what
  fit was given, `fit_samples`; the wait for its batches, `keras_input`), iterating a `tf.data.Dataset`
  eagerly outside `fit`.
- JAX: iterating grain's `DataLoader`, `MapDataset` and `IterDataset`; `jax.jit`'s calls watched
  (`device`: a step ends when its work is done); optax's update run outside jit (`optimizers`).
- MXNet: iterating `gluon.data.DataLoader`, `Trainer.step`'s updates watched (`device`); PaddlePaddle:
  `paddle.io.DataLoader`, `paddle.Model.fit`.
- Every framework's optimizer update counted as a step where no pipeline is iterated (`optimizers`).
A pipeline iterated from inside a framework package (grain's datasets iterating their parents, Keras
iterating the tf.data set it was given) is the framework's business and not wrapped.
"""

import sys

from . import device, facts, fit_samples, keras_input, optimizers, singa_mend, step_parts, torch_window
from .flops import count_torch_step
from .names import schema
from .passes import Pass

Probe = schema.Probe
#: Packages whose own iteration of a pipeline is not a training loop's.
FRAMEWORK_PACKAGES = ("torch", "tensorflow", "keras", "grain", "mxnet", "paddle", "jax", "tf_keras")


def called_from_framework(depth=2):  # type: (int) -> bool
    try:
        name = sys._getframe(depth).f_globals.get("__name__", "")
    except ValueError:
        return False
    return name.split(".", 1)[0] in FRAMEWORK_PACKAGES


def wrap_iter(cls, recorder, probe, needs_training=False, knobs=None, releases=False):
    """`cls.__iter__` handing out a Pass around the pipeline's own iterator (`releases`: dropped at its
    StopIteration, see `Pass`)."""
    original = cls.__iter__
    seen = set()  # type: set

    def __iter__(self):
        if called_from_framework() or recorder.suppress:
            return original(self)
        p = Pass(recorder, probe, needs_training, self, releases)
        if p.recording and knobs is not None:
            try:
                found = knobs(self)
            except Exception:  # noqa: BLE001 - a knob we cannot read is left out
                found = {}
            key = (probe, tuple(sorted(found.items())))
            if key not in seen:
                seen.add(key)
                recorder.emit(schema.Event.LOADER, probe=probe, knobs=found)
        return p.attach(original(self))

    __iter__.__wrapped__ = original
    cls.__iter__ = __iter__


def _attrs(obj, names):
    out = {}
    for key, name in names:
        value = getattr(obj, name, None)
        if isinstance(value, (bool, int, float, str)):
            out[key] = value
    return out


# --- PyTorch
def patch_torch(torch, recorder):
    recorder.frameworks["torch"] = str(getattr(torch, "__version__", ""))
    step_parts.patch_torch(torch, recorder)  # forward, backward, optimizer per step (tracer/probe/step_parts.py)
    tensor_backward = torch.Tensor.backward

    def backward(self, *args, **kwargs):
        recorder.mark_training()
        recorder.loss_reader = self.detach
        return tensor_backward(self, *args, **kwargs)

    backward.__wrapped__ = tensor_backward
    torch.Tensor.backward = backward
    facts.torch_classes(torch, recorder)
    try:
        optimizers.torch_optimizer(recorder)
    except (ImportError, AttributeError):  # torch < 2.0: the DataLoader and backward() still count
        pass
    count_torch_step(torch, recorder)  # one step's FLOPs (tracer/probe/flops.py)
    torch_window.install(recorder)  # `--trace torch`: the profiler over the trace window
    knobs = (
        ("num_workers", "num_workers"),
        ("pin_memory", "pin_memory"),
        ("persistent_workers", "persistent_workers"),
        ("prefetch_factor", "prefetch_factor"),
        ("batch_size", "batch_size"),
    )
    wrap_iter(torch.utils.data.DataLoader, recorder, Probe.TORCH_DATALOADER, True, lambda dl: _attrs(dl, knobs))


# --- TensorFlow and Keras
def tf_data_knobs(ds):
    """What a tf.data chain holds (outermost first): the knob advice fits the pipeline as written."""
    kinds, parallel = [], False
    for _ in range(32):
        kinds.append(type(ds).__name__.lstrip("_"))
        if kinds[-1] == "ParallelMapDataset":  # num_parallel_calls=1 makes one too, running one call at a time
            calls = getattr(ds, "_num_parallel_calls", None)
            parallel = parallel or int(calls.numpy() if hasattr(calls, "numpy") else calls or 0) != 1
        ds = getattr(ds, "_input_dataset", None)
        if ds is None:
            break
    return {
        "prefetch": any("Prefetch" in k for k in kinds),
        "map": any(k in ("MapDataset", "ParallelMapDataset") for k in kinds),
        "parallel_map": parallel,
        "cache": any("Cache" in k for k in kinds),
    }


def patch_tf_data(dataset_ops, recorder):
    cls = dataset_ops.DatasetV2
    original = cls.__iter__

    def eager_only(self):
        return original(self)

    wrap_iter(cls, recorder, Probe.TF_DATA, False, tf_data_knobs, releases=True)
    wrapped = cls.__iter__

    def __iter__(self):
        try:
            eager = dataset_ops.context.executing_eagerly()
        except Exception:  # noqa: BLE001
            eager = False
        # (this wrapper is the caller `wrap_iter` sees: whether a framework iterates is asked here)
        return wrapped(self) if eager and not called_from_framework() else original(self)

    cls.__iter__ = __iter__


def _framework_loop(recorder, callback_base, probe, samples):
    """A callback for a framework's own fit loop (Keras, paddle.Model): steps from its batch hooks, the
    epoch from its epoch hooks (all of it: the pipeline's start-up and tail are the epoch's). Where the
    loop reads its batches inside a compiled graph (Keras: `Probe.IN_GRAPH_INPUT`) a step is the time
    from the previous one, its wait the one `keras_input` measured, else left empty (not measured).
    `samples(step)`: the samples of the epoch's step number `step`, or None where not counted."""
    from .recorder import perf, wall_ns

    in_graph = probe in Probe.IN_GRAPH_INPUT

    class DlTracerProbe(callback_base):
        def __init__(self):
            callback_base.__init__(self)
            self._t_end = None  # type: object
            self._end_ns = 0
            self._t_begin = 0.0
            self._start_ns = 0

        def on_epoch_begin(self, epoch, logs=None):
            self._t_end, self._end_ns = perf(), wall_ns()
            if not recorder.epoch_open:
                recorder.begin_epoch(self._end_ns)

        def on_train_batch_begin(self, step, logs=None):
            self._t_begin, self._start_ns = perf(), wall_ns()

        def on_train_batch_end(self, step, logs=None):
            now = perf()
            last = self._t_end if self._t_end is not None else self._t_begin
            n = samples(step)
            if in_graph:  # the step from the previous one; its wait where `keras_input` took the batch
                wait, recorder.fit_wait = recorder.fit_wait, None
                wait = None if wait is None else min(wait, now - last)
                recorder.add_step(probe, self._end_ns or self._start_ns, wait, now - last - (wait or 0.0), n)
            else:
                wait = max(0.0, self._t_begin - last)
                recorder.add_step(probe, self._start_ns - int(wait * 1e9), wait, now - self._t_begin, n)
            self._t_end, self._end_ns = now, wall_ns()

        def on_epoch_end(self, epoch, logs=None):
            loss = (logs or {}).get("loss")
            if isinstance(loss, (list, tuple)):
                loss = loss[0] if loss else None
            try:
                loss = None if loss is None else float(loss)
            except (TypeError, ValueError):
                loss = None
            if recorder.epoch_open:
                recorder.end_epoch(loss, wall_ns())
            if recorder.diverged:
                model = getattr(self, "model", None)
                if model is not None:
                    model.stop_training = True

    return DlTracerProbe()


def _with_callback(args, kwargs, index, callback):
    """fit's arguments with `callback` added to its callbacks (given by keyword or at `index`)."""
    if len(args) > index:
        args = list(args)
        args[index] = list(args[index] or []) + [callback]
        return tuple(args), kwargs
    kwargs = dict(kwargs)
    kwargs["callbacks"] = list(kwargs.get("callbacks") or []) + [callback]
    return args, kwargs


def _fit_arg(args, kwargs, name, index, default=None):
    return kwargs.get(name, args[index] if index is not None and len(args) > index else default)


def patch_fit(model_cls, callback_base, recorder, probe, callbacks_index, batch_index, default_batch):
    """`fit` with the probe's callback added; a fit that raises (Ctrl-C, an error) leaves its epoch partial."""
    original = model_cls.fit

    def fit(self, *args, **kwargs):
        if recorder.suppress or recorder.active is not None:
            return original(self, *args, **kwargs)
        x = _fit_arg(args, kwargs, "x", 0, kwargs.get("train_data"))
        size = _fit_arg(args, kwargs, "batch_size", batch_index)
        size = size if isinstance(size, int) else (default_batch if hasattr(x, "shape") else None)
        samples = fit_samples.samples_of(x, size, kwargs.get("steps_per_epoch"), kwargs.get("validation_split") or 0.0)
        knobs = {"batch_size": samples(0)}
        if hasattr(x, "element_spec"):
            knobs.update(tf_data_knobs(x))
        recorder.emit(schema.Event.LOADER, probe=probe, knobs=knobs)
        facts.keras_classes(recorder, self)
        args, kwargs = _with_callback(
            args, kwargs, callbacks_index, _framework_loop(recorder, callback_base, probe, samples)
        )
        recorder.suppress += 1
        try:
            result = original(self, *args, **kwargs)
        except BaseException:
            if recorder.epoch_open:
                recorder.end_epoch(None, None, False, True)
            raise
        finally:
            recorder.suppress -= 1
        if recorder.epoch_open:
            recorder.end_epoch(None)
        return result

    fit.__wrapped__ = original
    model_cls.fit = fit


def patch_keras(keras, recorder):
    recorder.frameworks["keras"] = str(getattr(keras, "__version__", ""))
    # Model.fit(x, y, batch_size, epochs, verbose, callbacks, ...): Keras's default batch is 32
    patch_fit(keras.Model, keras.callbacks.Callback, recorder, Probe.KERAS_FIT, 5, 2, 32)
    optimizers.keras_optimizer(keras, recorder)
    keras_input.patch(keras, recorder)


# --- JAX's grain
def grain_knobs(ds):
    """grain's worker count: the MultiprocessingOptions of the first mp_prefetch in the chain (0: none)."""
    for _ in range(32):
        options = getattr(ds, "_multiprocessing_options", None) or getattr(ds, "multiprocessing_options", None)
        if options is not None:
            return _attrs(
                options, (("num_workers", "num_workers"), ("per_worker_buffer_size", "per_worker_buffer_size"))
            )
        cycle = getattr(ds, "_cycle_length", None)  # grain 0.2's mp_prefetch: an interleave over its workers
        if isinstance(cycle, int):
            return {"num_workers": cycle}
        parents = getattr(ds, "_parents", None) or ()  # (grain's `_parent` asserts there is exactly one)
        if not parents:
            break
        ds = parents[0]
    return {"num_workers": 0}


def patch_grain(grain, recorder):
    recorder.frameworks["grain"] = str(getattr(grain, "__version__", ""))
    for name in ("DataLoader", "MapDataset", "IterDataset"):
        base = getattr(grain, name, None)
        for cls in optimizers.subclasses(base) if base is not None else ():
            if "__iter__" in vars(cls) and cls.__module__.split(".", 1)[0] == "grain":
                wrap_iter(cls, recorder, Probe.GRAIN, False, grain_knobs)


# --- MXNet and PaddlePaddle
def patch_gluon(dataloader_module, recorder):
    knobs = (("num_workers", "_num_workers"), ("prefetch", "_prefetch"), ("pin_memory", "_pin_memory"))
    wrap_iter(dataloader_module.DataLoader, recorder, Probe.GLUON_DATALOADER, False, lambda dl: _attrs(dl, knobs))


def patch_paddle(paddle, recorder):
    recorder.frameworks["paddle"] = str(getattr(paddle, "__version__", ""))
    knobs = (("num_workers", "num_workers"), ("use_shared_memory", "use_shared_memory"))
    wrap_iter(paddle.io.DataLoader, recorder, Probe.PADDLE_DATALOADER, False, lambda dl: _attrs(dl, knobs))
    # Model.fit(train_data, eval_data, batch_size, epochs, eval_freq, log_freq, save_dir, save_freq,
    # verbose, drop_last, shuffle, num_workers, callbacks, ...)
    patch_fit(paddle.Model, paddle.callbacks.Callback, recorder, Probe.PADDLE_FIT, 12, 2, 1)
    optimizers.paddle_optimizer(paddle, recorder)


def version_only(name):
    def note(module, recorder):
        recorder.frameworks[name] = str(getattr(module, "__version__", ""))

    return note


#: module name -> what to do once it has executed.
PATCHES = {
    "torch": patch_torch,
    "tensorflow": version_only("tensorflow"),
    "tensorflow.python.data.ops.dataset_ops": patch_tf_data,
    "keras": patch_keras,
    "jax": device.patch_jax_version,
    "optax._src.base": optimizers.optax_update,  # optax's transformations, where update runs outside jit
    "grain": patch_grain,
    "mxnet": version_only("mxnet"),
    "mxnet.gluon.data.dataloader": patch_gluon,
    "mxnet.gluon.trainer": lambda module, recorder: (
        optimizers.mxnet_trainer(module, recorder),
        device.patch_mxnet_trainer(module, recorder),  # a step ends when its update is done (the engine defers)
    ),
    "paddle": patch_paddle,
    "singa": singa_mend.patch_singa,  # the wheel's defects mended as the built-in worker does
    "singa.opt": optimizers.singa_optimizer,
}


class _Loader(object):
    """Runs the module as its own loader does, then the patch; the module keeps its own loader."""

    def __init__(self, loader, patch, recorder):
        self.loader, self.patch, self.recorder = loader, patch, recorder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self.loader  # what the module's own code (and importlib.resources) sees
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        try:
            self.patch(module, self.recorder)
            if module.__name__ in schema.PROBED_IMPORTS:
                self.recorder.emit(schema.Event.VERSIONS, versions=dict(self.recorder.frameworks))
        except Exception as e:  # noqa: BLE001 - a hook that does not fit this version must not stop the script
            self.recorder.emit(
                schema.Event.TRACE_ERROR, error="probe: %s: %s: %s" % (module.__name__, type(e).__name__, e)
            )


class Finder(object):
    """A `sys.meta_path` entry that finds nothing itself (see the module's docstring)."""

    def __init__(self, recorder):
        self.recorder = recorder
        self._busy = set()  # type: set

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in PATCHES or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.discard(fullname)
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, PATCHES[fullname], self.recorder)
        return spec


def install(recorder):
    """Hooks every framework: those already imported now, the others when they are."""
    sys.meta_path.insert(0, Finder(recorder))
    for name, patch in PATCHES.items():
        module = sys.modules.get(name)
        if module is not None:
            patch(module, recorder)
