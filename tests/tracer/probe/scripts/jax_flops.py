"""A user's JAX training script for the FLOPs test: a small convolution and MLP trained for 2 epochs of 6
steps, each step two jitted calls (the gradients, then an update that donates the old parameters), marked
with `timed_epoch`. Prints XLA's own count of one step, `cost_analysis()` of both calls compiled for a
batch, as `own_flops_per_step N`. With the argument `eager`, the gradients are taken by an eager `jax.grad`
of a jitted loss instead: work the probe cannot count (it says so)."""

import sys

import jax
import jax.numpy as jnp
import numpy as np

try:
    from dltracer_probe import timed_epoch
except ImportError:  # not under the tracer

    def timed_epoch(batches):
        return batches


EPOCHS, STEPS, BATCH = 2, 6, 8


def loss(params, x, y):
    layout = ("NHWC", "HWIO", "NHWC")
    h = jax.lax.conv_general_dilated(x, params["conv"], (2, 2), ((1, 1), (1, 1)), dimension_numbers=layout)
    h = jax.nn.relu(h).reshape(x.shape[0], -1)
    h = jax.nn.relu(h @ params["w1"])
    logits = h @ params["w2"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


EAGER = sys.argv[1:] == ["eager"]
gradients = jax.grad(jax.jit(loss)) if EAGER else jax.jit(jax.grad(loss))


def _update(params, grads):
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)


update = jax.jit(_update, donate_argnums=(0,))


def batches(rng):
    for _ in range(STEPS):
        yield rng.normal(size=(BATCH, 16, 16, 3)).astype("float32"), rng.integers(0, 10, BATCH).astype("int32")


key = jax.random.PRNGKey(0)
params = {
    "conv": 0.1 * jax.random.normal(key, (3, 3, 3, 16)),
    "w1": 0.05 * jax.random.normal(key, (8 * 8 * 16, 128)),
    "w2": 0.05 * jax.random.normal(key, (128, 10)),
}
rng = np.random.default_rng(0)
x0, y0 = next(batches(rng))
own = 0.0
for fn, args in ((jax.jit(jax.grad(loss)), (params, x0, y0)), (jax.jit(_update), (params, params))):
    found = fn.lower(*args).compile().cost_analysis()
    own += (found[0] if isinstance(found, list) else found)["flops"]

for _epoch in range(EPOCHS):
    for x, y in timed_epoch(batches(rng)):
        params = update(params, gradients(params, x, y))
    float(params["w2"][0, 0])
print("own_flops_per_step", int(own), flush=True)
