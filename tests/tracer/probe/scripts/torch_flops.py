"""A user's PyTorch training script for the FLOPs test: a small CNN trained for 2 epochs of 6 steps, which
prints its own FlopCounterMode count of one training step (forward, backward, update), counted after the
training on a copy of the model, as `own_flops_per_step N`."""

import copy

import torch
from torch.utils.flop_counter import FlopCounterMode

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1),
    torch.nn.ReLU(),
    torch.nn.Conv2d(16, 32, 3, stride=2, padding=1),
    torch.nn.ReLU(),
    torch.nn.Flatten(),
    torch.nn.Linear(32 * 16 * 16, 10),
)
data = torch.utils.data.TensorDataset(torch.randn(48, 3, 32, 32), torch.randint(0, 10, (48,)))
loader = torch.utils.data.DataLoader(data, batch_size=8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def step(net, opt, x, y):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(x), y).backward()
    opt.step()


for _epoch in range(2):
    for x, y in loader:
        step(model, optimizer, x, y)

twin = copy.deepcopy(model)
twin_optimizer = torch.optim.SGD(twin.parameters(), lr=0.01, momentum=0.9)
x, y = next(iter(loader))
with FlopCounterMode(display=False) as counter:
    step(twin, twin_optimizer, x, y)
print("own_flops_per_step", counter.get_total_flops(), flush=True)
