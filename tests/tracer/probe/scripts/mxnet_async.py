"""A Gluon loop as people write it: a DataLoader over arrays in memory, no wait for the engine inside the
loop, the epoch's loss read after it. MXNet's engine runs the work behind the host (on the CPU too): the
host loop ends long before the work does, and the loss read drains it. 3 epochs of 8 steps of 64. Prints its
own truth as one JSON line per epoch: steps, samples, perf_counter seconds per epoch (the loss read
included) and of the host loop alone."""

import json
import time

import numpy as np
from mxnet import autograd, gluon

N, B, W = 512, 64, 1024
x = np.random.default_rng(0).normal(size=(N, W)).astype("float32")
y = np.random.default_rng(1).integers(0, 10, N).astype("float32")
loader = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=B)
net = gluon.nn.Sequential()
for _ in range(4):
    net.add(gluon.nn.Dense(W, activation="tanh"))
net.add(gluon.nn.Dense(10))
net.initialize()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
lossf = gluon.loss.SoftmaxCrossEntropyLoss()
truth = {"epochs": 0, "steps": 0, "samples": 0, "epoch_s": [], "host_loop_s": []}
for _epoch in range(3):
    t0 = time.perf_counter()
    for xb, yb in loader:
        with autograd.record():
            loss = lossf(net(xb), yb)
        loss.backward()
        trainer.step(xb.shape[0])
        truth["steps"] += 1
        truth["samples"] += xb.shape[0]
    truth["host_loop_s"].append(time.perf_counter() - t0)
    truth["loss"] = float(loss.mean().asscalar())  # the epoch's loss read: the queued work drains here
    truth["epoch_s"].append(time.perf_counter() - t0)
    truth["epochs"] += 1
    print(json.dumps(truth), flush=True)
