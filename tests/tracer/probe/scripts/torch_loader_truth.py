"""A PyTorch DataLoader loop that prints its own truth as one JSON line per finished epoch and at the end:
epochs, steps, samples, perf_counter seconds per epoch (from before `iter(loader)` to after its
StopIteration: the workers' start-up and shutdown included) and the seconds spent in `iter()` and `next()`
(the wait for data, measured by the script itself).

    --workers N        loader workers, not persistent: spawned again every epoch
    --stop-in E:S      leave epoch E after S steps: by an exception (--how raise) or Ctrl-C's
                       KeyboardInterrupt (--how interrupt)
"""

import argparse
import json
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    """64 items of 8 features, each taking `ms` to make (a decode of known cost)."""

    def __init__(self, ms):
        self.ms = ms
        self.x = torch.randn(64, 8)
        self.y = torch.randint(0, 4, (64,))

    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(self.ms / 1000)
        return self.x[i], self.y[i]


p = argparse.ArgumentParser()
p.add_argument("--workers", type=int, default=0)
p.add_argument("--ms", type=float, default=1.0)
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--stop-in", default="")
p.add_argument("--how", default="raise")
args = p.parse_args()
stop = tuple(int(v) for v in args.stop_in.split(":")) if args.stop_in else None

torch.manual_seed(0)
loader = DataLoader(Slow(args.ms), batch_size=8, num_workers=args.workers, persistent_workers=False)
model = torch.nn.Linear(8, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
truth = {"epochs": 0, "steps": 0, "samples": 0, "epoch_s": [], "wait_s": [], "steps_s": []}
for epoch in range(1, args.epochs + 1):
    t0 = time.perf_counter()
    it = iter(loader)
    wait = time.perf_counter() - t0
    step = 0
    while True:
        t = time.perf_counter()
        try:
            x, y = next(it)
        except StopIteration:
            break
        wait += time.perf_counter() - t
        if stop == (epoch, step):
            if args.how == "interrupt":
                raise KeyboardInterrupt
            raise RuntimeError(f"a bad batch in epoch {epoch}")
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        time.sleep(0.005)
        step += 1
        truth["steps"] += 1
        truth["samples"] += len(x)
    truth["steps_s"].append(t - t0)  # up to the last next(), which raised StopIteration
    truth["epoch_s"].append(time.perf_counter() - t0)
    truth["wait_s"].append(wait)
    truth["epochs"] += 1
    print(json.dumps(truth), flush=True)
