"""A data-parallel job as a user writes it (DDP over gloo on the CPU, a plain DataLoader loop) whose rank 1
sleeps `--sleep-ms` before each step's forward pass. Each rank prints its own truth: rank 1 the median time
it slept, every rank the images it trained and its own forward, backward and optimizer time per step."""

import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--sleep-ms", type=float, default=30.0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--items", type=int, default=1024)
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
torch.set_num_threads(1)
net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
model = torch.nn.parallel.DistributedDataParallel(net)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(args.items, 64), torch.randint(0, 10, (args.items,)))
slept, images = [], 0
forward, backward, update = [], [], []
for _epoch in range(args.epochs):
    for x, y in DataLoader(data, batch_size=32):
        t0 = time.perf_counter()
        if rank == 1:
            time.sleep(args.sleep_ms / 1000)
            slept.append(time.perf_counter() - t0)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        optimizer.step()
        t3 = time.perf_counter()
        forward.append(t1 - t0)
        backward.append(t2 - t1)
        update.append(t3 - t2)
        images += len(x)
if rank == 1:
    print(f"rank 1 slept {1000 * statistics.median(slept):.3f} ms a step (median of {len(slept)})", flush=True)
f, b, o = (1000 * statistics.median(v) for v in (forward, backward, update))
print(f"rank {rank}: {images} images; median forward {f:.3f} ms, backward {b:.3f} ms, optimizer {o:.3f} ms", flush=True)
dist.destroy_process_group()
