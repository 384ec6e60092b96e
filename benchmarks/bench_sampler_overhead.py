"""Does the sampler slow training down? Same short PyTorch CPU training with the sampler at 10 Hz and
with sampling off (`--sample-hz 0`), alternating pairs, median ratio of epoch times. Goal: <= 1.01.

    python benchmarks/bench_sampler_overhead.py [--pairs 5] [--limit 120] [--epochs 3]

Epoch 1 is dropped (warm-up); the ratio is (mean epoch time sampled) / (mean epoch time unsampled).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tracer.core.runfolder import list_runs


def one_run(out: Path, hz: float, args: argparse.Namespace) -> float:
    cmd = [
        sys.executable, "-m", "tracer", "profile", "--framework", "pytorch", "--model", args.model,
        "--dataset", "small", "--limit", str(args.limit), "--epochs", str(args.epochs),
        "--image-size", str(args.image_size), "--sample-hz", str(hz), "--out", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True)
    folder = max(list_runs(out), key=lambda r: r.path.stat().st_mtime)
    epochs = folder.epochs()[1:]
    return statistics.fmean(e.duration_s for e in epochs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--limit", type=int, default=120)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--model", default="resnet50")
    args = p.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            first, second = (10.0, 0.0) if i % 2 == 0 else (0.0, 10.0)  # alternate the order
            times = {first: one_run(Path(tmp), first, args), second: one_run(Path(tmp), second, args)}
            ratios.append(times[10.0] / times[0.0])
            print(f"pair {i + 1}: sampled {times[10.0]:.3f} s, unsampled {times[0.0]:.3f} s, ratio {ratios[-1]:.4f}")
    print(f"median ratio (sampled / unsampled epoch time) over {args.pairs} pairs: {statistics.median(ratios):.4f}")
    print(f"spread of the pairs' ratios: {min(ratios):.3f} to {max(ratios):.3f}")


if __name__ == "__main__":
    main()
