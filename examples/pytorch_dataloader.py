"""A plain PyTorch training loop with a DataLoader: what most scripts look like.

    python examples/pytorch_dataloader.py --epochs 2 --items 256
    tracer profile -- python examples/pytorch_dataloader.py --slow-ms 20   # an input-bound loader

`--slow-ms` makes each item cost that many milliseconds to load (as decoding a large JPEG would);
`--workers` spreads the loading over DataLoader worker processes.
"""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    """Random 3x32x32 images in 10 classes, each costing `slow_ms` to load."""

    def __init__(self, items: int, slow_ms: float) -> None:
        g = torch.Generator().manual_seed(0)
        self.images = torch.randn(items, 3, 32, 32, generator=g)
        self.labels = torch.randint(0, 10, (items,), generator=g)
        self.slow_s = slow_ms / 1000

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        if self.slow_s:
            time.sleep(self.slow_s)
        return self.images[i], self.labels[i]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--items", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--slow-ms", type=float, default=0.0)
    args = p.parse_args()

    torch.manual_seed(0)
    loader = DataLoader(
        SlowDataset(args.items, args.slow_ms), batch_size=args.batch, shuffle=True, num_workers=args.workers
    )
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 10),
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(1, args.epochs + 1):
        model.train()
        total, started = 0.0, time.perf_counter()
        for images, labels in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            total += loss.item()
        seconds, steps = time.perf_counter() - started, len(loader)
        print(f"epoch {epoch}: {seconds:.3f} s, {1000 * seconds / steps:.2f} ms/step, mean loss {total / steps:.4f}")


if __name__ == "__main__":
    main()
