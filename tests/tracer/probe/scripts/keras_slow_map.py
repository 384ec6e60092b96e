"""Keras `fit` on a slow tf.data pipeline: a `map` of a 6 ms `py_function`, num_parallel_calls=1, batch,
prefetch (68 samples in batches of 8: 9 steps an epoch, the last of 4), a 10-class classifier, 3 epochs.
Prints its own truth as one JSON line: epochs, steps, samples, perf_counter seconds per epoch (a
callback's epoch begin to end), the pipeline alone, iterated once before training, and a step's compute
alone (`train_on_batch` on a batch in memory, Keras's own per-call work included)."""

import json
import time

import numpy as np
import tensorflow as tf

N, BATCH, CLASSES = 68, 8, 10


def slow(x, y):
    def work(v):
        time.sleep(0.006)
        return v

    x = tf.py_function(work, [x], tf.float32)
    x.set_shape((16,))
    return x, y


rng = np.random.default_rng(0)
features = rng.normal(size=(N, 16)).astype("float32")
labels = rng.integers(0, CLASSES, N)
dataset = (
    tf.data.Dataset.from_tensor_slices((features, labels)).map(slow, num_parallel_calls=1).batch(BATCH).prefetch(1)
)
t = time.perf_counter()
for _ in dataset.as_numpy_iterator():  # (the probe leaves a framework's own iteration alone)
    pass
pipeline_s = time.perf_counter() - t

model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(CLASSES)])
model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
# A step's compute alone, its batch already in memory (train_on_batch: not a fit, not an epoch).
xb, yb = features[:BATCH], labels[:BATCH]
for _ in range(3):
    model.train_on_batch(xb, yb)
t = time.perf_counter()
for _ in range(10):
    model.train_on_batch(xb, yb)
compute_s = (time.perf_counter() - t) / 10


class Truth(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.truth = {"epochs": 0, "steps": 0, "samples": N * 3, "epoch_s": [], "pipeline_s": pipeline_s}
        self.truth["compute_s"] = compute_s

    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.truth["steps"] += 1

    def on_epoch_end(self, epoch, logs=None):
        self.truth["epoch_s"].append(time.perf_counter() - self.t0)
        self.truth["epochs"] += 1


truth = Truth()
model.fit(dataset, epochs=3, verbose=0, callbacks=[truth])
print(json.dumps(truth.truth))
