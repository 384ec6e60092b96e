"""A TensorFlow eager loop over a shuffled, prefetched tf.data pipeline, trained while two busy processes
load the machine, printing its own truth as one JSON line at the end: epochs, steps, samples, the
perf_counter seconds of each epoch (from before its `for` to the loop's next line) and of each epoch's
tail (from its last step's end to that line).

On a busy machine the tail holds the pipeline's iterator being torn down after its StopIteration (its
threads joined): 0.1-1.2 s here (2 cores, 6 Dec 2026), which the epoch must hold.
"""

import json
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf

busy = [subprocess.Popen([sys.executable, "-I", "-c", "while True: pass"]) for _ in range(2)]
try:
    tf.random.set_seed(0)
    x = np.random.RandomState(0).rand(2048, 64).astype("float32")
    y = np.arange(2048) % 3
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048).batch(64).prefetch(2)
    model = tf.keras.Sequential(
        [tf.keras.layers.Dense(128, activation="relu") for _ in range(3)] + [tf.keras.layers.Dense(3)]
    )
    optimizer = tf.keras.optimizers.SGD(0.01)
    loss_of = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    truth = {"epochs": 0, "steps": 0, "samples": 0, "epoch_s": [], "tail_s": []}
    for _ in range(3):
        t0 = time.perf_counter()
        last = t0
        for xb, yb in dataset:
            with tf.GradientTape() as tape:
                loss = loss_of(yb, model(xb))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            truth["steps"] += 1
            truth["samples"] += int(xb.shape[0])
            last = time.perf_counter()
        end = time.perf_counter()
        truth["epochs"] += 1
        truth["epoch_s"].append(end - t0)
        truth["tail_s"].append(end - last)
finally:
    for p in busy:
        p.kill()
        p.wait()
print(json.dumps(truth), flush=True)
