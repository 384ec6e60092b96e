"""A PyTorch loop over tensor slices, no DataLoader: 3 epochs of 8 batches of 16, a 10-class classifier.
With `--marker` the loop is marked (`timed_epoch`); without, the probe counts optimizer updates.
Prints its own truth as one JSON line: epochs, steps, samples, perf_counter seconds per epoch."""

import json
import sys
import time

import torch

try:
    from dltracer_probe import timed_epoch
except ImportError:  # not under the tracer

    def timed_epoch(batches):
        return batches


EPOCHS, STEPS, BATCH, CLASSES = 3, 8, 16, 10
torch.manual_seed(0)
x = torch.randn(STEPS * BATCH, 32)
y = torch.randint(0, CLASSES, (STEPS * BATCH,))
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, CLASSES))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = torch.nn.CrossEntropyLoss()
marker = "--marker" in sys.argv
truth = {"epochs": 0, "steps": 0, "samples": 0, "epoch_s": []}
for _epoch in range(EPOCHS):
    t0 = time.perf_counter()
    batches = zip(x.split(BATCH), y.split(BATCH))
    for xb, yb in timed_epoch(batches) if marker else batches:
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        time.sleep(0.01)  # the step's own work, of known size
        truth["steps"] += 1
        truth["samples"] += len(xb)
    truth["epoch_s"].append(time.perf_counter() - t0)
    truth["epochs"] += 1
print(json.dumps(truth))
