"""A SINGA training loop as its tutorial writes it (a small MLP, `tensor.from_numpy`, softmax cross
entropy, SGD) inside the probe's marker: each step's loss printed, then the steps and epochs it ran.
With `--no-marker` the loop is the tutorial's alone (a plain `range`): only the optimizer's calls are seen."""

import sys

import numpy as np
from singa import autograd, device, layer, model, opt, tensor

try:
    from dltracer_probe import steps
except ImportError:  # outside the tracer: the plain range

    def steps(iterable):
        return iterable


if "--no-marker" in sys.argv:

    def steps(iterable):  # noqa: F811 - the unmarked loop
        return iterable


class MLP(model.Model):
    def __init__(self):
        super().__init__()
        self.fc1 = layer.Linear(32)
        self.relu = layer.ReLU()
        self.fc2 = layer.Linear(4)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer


rng = np.random.RandomState(0)
x_np = rng.randn(64, 16).astype(np.float32)
y_np = rng.randint(0, 4, 64).astype(np.int32)
dev = device.get_default_device()
net = MLP()
net.set_optimizer(opt.SGD(lr=0.1))
tx, ty = tensor.from_numpy(x_np), tensor.from_numpy(y_np)
tx.to_device(dev)
ty.to_device(dev)
net.compile([tx], is_train=True, use_graph=False, sequential=False)
autograd.training = True
ran = 0
for epoch in range(2):
    for step in steps(range(4)):
        bx = tensor.from_numpy(x_np[step * 16 : (step + 1) * 16])
        by = tensor.from_numpy(y_np[step * 16 : (step + 1) * 16])
        _, loss = net(bx, by)
        print(f"epoch {epoch + 1} step {step} loss {tensor.to_numpy(loss)[0]:.4f}", flush=True)
        ran += 1
print(f"trained {ran} steps in 2 epochs", flush=True)
