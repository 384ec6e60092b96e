"""A JAX loop with asynchronous dispatch, marked with `timed_epoch`: a jitted step of known device work
(a chain of matmuls, ~tens of ms on a CPU) fed by a NumPy generator that takes 2 ms a batch, 2 ms of host
work after each dispatch, and no wait for the device inside the loop: the queued work drains when the
epoch's loss is read. 3 epochs of 8 steps of 16. Prints its own truth as one JSON line: epochs, steps,
samples, perf_counter seconds per epoch (loss read included), its own wait in next(), and the step's
device time measured alone before training."""

import json
import time

import jax
import jax.numpy as jnp
import numpy as np

try:
    from dltracer_probe import timed_epoch
except ImportError:  # not under the tracer

    def timed_epoch(batches):
        return batches


EPOCHS, STEPS, BATCH, WIDTH = 3, 8, 16, 768


@jax.jit
def step(w, x):
    h = x @ w
    for _ in range(40):
        h = jnp.tanh(h @ w)
    loss = jnp.mean(h**2)
    return w - 1e-4 * jnp.outer(jnp.ones(WIDTH), jnp.mean(h, axis=0)), loss


def batches(rng):
    for _ in range(STEPS):
        time.sleep(0.002)
        yield rng.normal(size=(BATCH, WIDTH)).astype("float32")


rng = np.random.default_rng(0)
w = jnp.eye(WIDTH) * 0.5
x0 = jnp.ones((BATCH, WIDTH))
step(w, x0)[1].block_until_ready()  # compiled before timing
t = time.perf_counter()
for _ in range(5):
    step(w, x0)[1].block_until_ready()
device_s = (time.perf_counter() - t) / 5

HOST_S = 0.004  # a step's host time: 2 ms in the generator, 2 ms after the dispatch
# The device waits for data only where the host has not handed it the next step yet: for the epoch's
# first batch (the queue drained at the last epoch's loss read), then none while its work (device_s)
# outlasts the host's. Per epoch, that wait over the epoch: `expected_wait_pct`.
truth = {"epochs": 0, "steps": 0, "samples": 0, "epoch_s": [], "wait_s": [], "device_s": device_s}
truth["expected_wait_pct"] = []
for _epoch in range(EPOCHS):
    t0 = time.perf_counter()
    wait = first = 0.0
    it = iter(timed_epoch(batches(rng)))
    while True:
        t = time.perf_counter()
        try:
            x = next(it)
        except StopIteration:
            break
        wait += time.perf_counter() - t
        first = wait if truth["steps"] % STEPS == 0 else first
        w, loss = step(w, x)
        time.sleep(0.002)  # host work beside the device's
        truth["steps"] += 1
        truth["samples"] += len(x)
    float(loss)  # the epoch's loss read: the queued work drains here
    truth["epoch_s"].append(time.perf_counter() - t0)
    truth["wait_s"].append(wait)
    starved = first + (STEPS - 1) * max(0.0, HOST_S - device_s)
    truth["expected_wait_pct"].append(100 * starved / truth["epoch_s"][-1])
    truth["epochs"] += 1
print(json.dumps(truth))
