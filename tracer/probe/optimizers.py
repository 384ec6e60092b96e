"""Steps without a known loader: each framework's optimizer update counted as a step, where the script
iterates no pipeline the probe knows (a loop over tensor slices, a generator, a NumPy iterator).

Such a step is timed from the previous update (the first from the first backward or update: its forward
before that is not seen); its wait for data and its samples are not seen, and say so (empty cells).
An update traced into a compiled graph (`tf.function`, `jax.jit`, optax inside it) runs no Python per
step and is not counted: those loops need the marker (`dltracer_probe.timed_epoch`). optax's update run
outside jit is counted (`optax_update`): on its own arrays, not on a jit's tracers.
"""

import functools
import importlib

from .names import schema
from .recorder import perf, wall_ns

Probe = schema.Probe


def _counting(original, recorder, probe, when=None, samples=None):
    """`original` (an update method) that counts one step per outermost call (a subclass calling its
    parent's update counts once) where `when()` holds; `samples(args, kwargs)`: its batch, where it says."""
    depth, began = [0], [None]  # type: list, list

    @functools.wraps(original)
    def update(*args, **kwargs):
        if depth[0] == 0:
            began[0] = (perf(), wall_ns())
        depth[0] += 1
        try:
            return original(*args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0 and (when is None or when()):
                n = None
                if samples is not None:
                    try:
                        n = int(samples(args, kwargs))
                    except Exception:  # noqa: BLE001 - samples not said: not counted
                        n = None
                recorder.optimizer_step(probe, n, began[0])

    update.__wrapped__ = original
    return update


def subclasses(cls):
    """`cls` and every class below it (the probe patches each that defines its own method)."""
    found, todo = [], [cls]
    while todo:
        c = todo.pop()
        found.append(c)
        todo.extend(c.__subclasses__())
    return found


def _patch_all(base, name, recorder, probe, when=None, samples=None):
    """`name` counted where `base` gets it from (a parent: Keras 3's BaseOptimizer) and on each subclass
    that defines its own (Adam's own step, say)."""
    owner = next((c for c in base.__mro__ if name in vars(c)), base)
    for cls in subclasses(owner):
        if name in vars(cls):
            setattr(cls, name, _counting(vars(cls)[name], recorder, probe, when, samples))


def torch_optimizer(recorder):
    """PyTorch's global optimizer-step hook (torch >= 2.0); `torch.optim.optimizer` is a submodule that
    `torch.optim` does not hold as an attribute on every version, so it is imported by its name."""
    module = importlib.import_module("torch.optim.optimizer")
    module.register_optimizer_step_post_hook(
        lambda optimizer, args, kwargs: recorder.optimizer_step(Probe.TORCH_OPTIMIZER)
    )


def _tf_eager():  # type: () -> bool
    tf = importlib.import_module("tensorflow")
    return bool(tf.executing_eagerly())


def keras_optimizer(keras, recorder):
    """`apply_gradients` run eagerly (a `GradientTape` loop); inside `tf.function` it is traced once."""
    _patch_all(keras.optimizers.Optimizer, "apply_gradients", recorder, Probe.KERAS_OPTIMIZER, _tf_eager)


def paddle_optimizer(paddle, recorder):
    _patch_all(paddle.optimizer.Optimizer, "step", recorder, Probe.PADDLE_OPTIMIZER)


def mxnet_trainer(trainer_module, recorder):
    """`Trainer.step(batch_size)` (or `allreduce_grads` then `update(batch_size)`): one update each."""
    for name in ("step", "update"):
        _patch_all(trainer_module.Trainer, name, recorder, Probe.MXNET_TRAINER, None, _batch_size)


def _batch_size(args, kwargs):  # type: (tuple, dict) -> int
    return kwargs["batch_size"] if "batch_size" in kwargs else args[1]


def singa_optimizer(opt_module, recorder):
    """`optimizer(loss)`: SINGA's backward and update of every parameter in one call."""
    _patch_all(opt_module.Optimizer, "__call__", recorder, Probe.SINGA_OPTIMIZER)


def optax_update(base_module, recorder):
    """Every optax transformation is a `GradientTransformation` (a NamedTuple of `init` and `update`): its
    construction wraps `update` so that the outermost call (a `chain`'s, not its parts') made on concrete
    arrays counts one step; a call on a jit's tracers is the graph being traced, once, and does not."""
    cls = base_module.GradientTransformation
    original_new = cls.__new__
    depth = [0]
    jax = importlib.import_module("jax")
    tracer_type = jax.core.Tracer
    leaves = jax.tree_util.tree_leaves

    def traced(args):  # type: (tuple) -> bool
        first = leaves(args[0]) if args else []
        return bool(first) and isinstance(first[0], tracer_type)

    def wrap(update):
        if getattr(update, "_dltracer_counted", False) or not callable(update):
            return update

        @functools.wraps(update)
        def counted(*args, **kwargs):
            outer = depth[0] == 0
            began = (perf(), wall_ns()) if outer else None
            depth[0] += 1
            try:
                return update(*args, **kwargs)
            finally:
                depth[0] -= 1
                if outer and not traced(args):
                    recorder.optimizer_step(Probe.OPTAX_UPDATE, None, began)

        counted._dltracer_counted = True
        return counted

    def __new__(klass, init, update):
        return original_new(klass, init, wrap(update))

    cls.__new__ = staticmethod(__new__)
