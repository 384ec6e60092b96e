"""A plain PyTorch loop whose optimizer step costs what `--optimizer-sleep-ms` says (a stand-in for a
costly update: an EMA of the weights, a sharded optimizer): it prints its own median forward, backward and
optimizer time per step, measured around each call as the probe measures them."""

import argparse
import statistics
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--optimizer-sleep-ms", type=float, default=0.0)
args = parser.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(512, 64), torch.randint(0, 10, (512,)))
forward, backward, update = [], [], []
for _epoch in range(3):
    for x, y in DataLoader(data, batch_size=32):
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        optimizer.step()
        time.sleep(args.optimizer_sleep_ms / 1000)  # after step(): outside the optimizer's own time
        t3 = time.perf_counter()
        forward.append(t1 - t0)
        backward.append(t2 - t1)
        update.append(t3 - t2)
f, b, o = (1000 * statistics.median(v) for v in (forward, backward, update))
print(f"median forward {f:.3f} ms, backward {b:.3f} ms, optimizer and after {o:.3f} ms", flush=True)
