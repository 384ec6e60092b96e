"""A training loop no probe recognises (plain NumPy, batches from a generator), marked with
`dltracer_probe.timed_epoch`: each call is an epoch, each batch a step. Runs unchanged outside the tracer.

    python examples/marker_loop.py
    tracer profile -- python examples/marker_loop.py
"""

import argparse

import numpy as np

try:
    from dltracer_probe import timed_epoch
except ImportError:  # not under `tracer profile`: the loop runs as it is

    def timed_epoch(batches):
        return batches


def batches(x: np.ndarray, y: np.ndarray, size: int, rng: np.random.Generator):
    order = rng.permutation(len(x))
    for i in range(0, len(x) - size + 1, size):
        yield x[order[i : i + size]], y[order[i : i + size]]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--items", type=int, default=4096)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args()

    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.items, 64))
    y = x @ rng.normal(size=64) + 0.1 * rng.normal(size=args.items)
    w = np.zeros(64)
    for epoch in range(1, args.epochs + 1):
        for xb, yb in timed_epoch(batches(x, y, args.batch, rng)):  # the marker: one epoch of steps
            grad = 2 * xb.T @ (xb @ w - yb) / len(xb)
            w -= 0.05 * grad
        print(f"epoch {epoch}: mse {np.mean((x @ w - y) ** 2):.4f}")


if __name__ == "__main__":
    main()
