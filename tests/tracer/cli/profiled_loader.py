"""A small real PyTorch training under `torch.profiler`, fed by a DataLoader whose items cost real work
(each one a JPEG decoded and resized with Pillow), written as a Chrome trace: the kind of trace a user
brings to `tracer import`. Run it with PyTorch's interpreter:

    python profiled_loader.py OUT.json --workers 0     # the main process decodes: the step waits for data
    python profiled_loader.py OUT.json --workers 4     # four loader processes decode ahead

It prints its own truth on its last line as JSON: the profiled steps, and the seconds it waited in
`next(loader)` and spent in all over those steps, timed by itself.
"""

import argparse
import io
import json
import time

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset

WAIT, WARMUP = 1, 1  # the profiler's schedule: steps skipped, steps warmed up, then the active ones


class JpegDataset(Dataset):
    """`items` noisy 512x512 JPEGs held as bytes; an item is one decoded, resized to 64x64, made a tensor."""

    def __init__(self, items: int) -> None:
        rng = np.random.default_rng(0)
        self.blobs = []
        for _ in range(items):
            buffer = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)).save(buffer, "JPEG", quality=95)
            self.blobs.append(buffer.getvalue())
        self.labels = rng.integers(0, 10, items)

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, i: int):
        image = Image.open(io.BytesIO(self.blobs[i])).convert("RGB").resize((64, 64), Image.BICUBIC)
        pixels = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)
        return pixels, int(self.labels[i])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=6, help="active (profiled) steps")
    args = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    total_steps = WAIT + WARMUP + args.steps
    loader = DataLoader(
        JpegDataset(total_steps * args.batch), batch_size=args.batch, num_workers=args.workers, shuffle=False
    )
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    schedule = torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=args.steps, repeat=1)
    waited, spent = [], []
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=schedule,
        record_shapes=True,  # the batch, read by `tracer import` from the first convolution's input
        on_trace_ready=lambda prof: prof.export_chrome_trace(args.out),
    ) as prof:
        batches = iter(loader)
        for step in range(total_steps):
            started = time.perf_counter()
            images, labels = next(batches)
            fetched = time.perf_counter()
            optimizer.zero_grad()
            loss_fn(model(images), labels).backward()
            optimizer.step()
            if step >= WAIT + WARMUP:  # the profiled steps
                waited.append(fetched - started)
                spent.append(time.perf_counter() - started)
            prof.step()
    print(json.dumps({"steps": len(spent), "batch": args.batch, "wait_s": sum(waited), "step_s": sum(spent)}))


if __name__ == "__main__":
    main()
