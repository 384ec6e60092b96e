"""A plain PyTorch DataLoader loop, nothing of the tracer in it, that prints its own truth as one JSON line:
each step's epoch, number and wall-clock span (`time.time_ns`, from asking for its batch to the end of its
optimizer step) and the forward calls it made per step (one `nn.Linear` each: one `aten::linear`).

    --epochs N         epochs of 8 steps (batch 8 of 64 items)
Under torchrun (gloo) each rank trains its own shard through DistributedDataParallel and prints its line
with its rank.
"""

import argparse
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=3)
args = p.parse_args()

world, rank = 1, 0
if torch.distributed.is_torchelastic_launched():  # under torchrun
    torch.distributed.init_process_group("gloo")
    world, rank = torch.distributed.get_world_size(), torch.distributed.get_rank()
torch.manual_seed(0)
data = TensorDataset(torch.randn(64 * world, 8), torch.randint(0, 4, (64 * world,)))
shard = torch.utils.data.Subset(data, range(rank * 64, (rank + 1) * 64))
loader = DataLoader(shard, batch_size=8)
model = torch.nn.Linear(8, 4)
if world > 1:
    model = torch.nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
steps = []
for epoch in range(1, args.epochs + 1):
    it = iter(loader)
    step = 0
    while True:
        start = time.time_ns()
        try:
            x, y = next(it)
        except StopIteration:
            break
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        time.sleep(0.002)
        steps.append({"epoch": epoch, "step": step, "start_ns": start, "end_ns": time.time_ns()})
        step += 1
# one write of the whole line: two ranks share this stdout, and print() writes the text and its newline
# apart, so the ranks' lines could interleave on a busy machine
sys.stdout.flush()
os.write(1, (json.dumps({"rank": rank, "linear_per_step": 1, "steps": steps}) + "\n").encode())
if world > 1:
    torch.distributed.destroy_process_group()
