"""Loader-worker sweep: for each framework, the mean epoch time and data-wait share at each worker count,
where its best lies, and how far the default budget (min(cores - 1, 8), the same for all) is from it.

    python benchmarks/loader_sweep.py --workers 0 1 2 --limit 32 --image-size 64 --batch 8

Each cell is one real `tracer profile` run; TensorFlow also gets `--workers autotune`. The first epoch
(graph tracing, worker start) is left out of the mean.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from analyzers import steps
from tracer.core.runfolder import list_runs
from tracer.sysinfo import cpu_model
from tracer.worker.base import AUTOTUNE, default_loader_workers

FRAMEWORKS = ("pytorch", "tensorflow", "mxnet", "paddle")


@dataclass(frozen=True)
class Cell:
    framework: str
    workers: str
    status: str
    mean_epoch_s: float | None
    data_wait_pct: float | None


def run_cell(args: argparse.Namespace, out: Path, framework: str, workers: str) -> Cell:
    folder_out = out / f"{framework}-w{workers}"
    cmd = [sys.executable, "-m", "tracer", "profile", "--framework", framework, "--model", args.model]
    cmd += ["--dataset", args.dataset, "--batch", str(args.batch), "--epochs", str(args.epochs)]
    cmd += ["--limit", str(args.limit), "--image-size", str(args.image_size), "--workers", workers]
    cmd += ["--out", str(folder_out)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    subprocess.run(cmd, capture_output=True, text=True)
    runs = list_runs(folder_out) if folder_out.exists() else []
    if not runs:
        return Cell(framework, workers, "refused", None, None)
    folder = runs[-1]
    epochs = folder.epochs()[args.warmup :]
    mean = sum(e.duration_s for e in epochs) / len(epochs) if epochs else None
    shares = [v for k, v in steps.data_wait_shares(folder).items() if k > args.warmup and v is not None]
    wait = 100 * sum(shares) / len(shares) if shares else None
    return Cell(framework, workers, folder.read_record().outcome.status.value, mean, wait)


def markdown(cells: list[Cell], default: int) -> str:
    lines = [
        "| framework | workers | mean epoch (s) | data wait % | vs best |",
        "| --- | --- | --- | --- | --- |",
    ]
    for fw in dict.fromkeys(c.framework for c in cells):
        mine = [c for c in cells if c.framework == fw]
        timed = [c.mean_epoch_s for c in mine if c.mean_epoch_s is not None]
        best = min(timed) if timed else None
        for c in mine:
            mark = " (default)" if c.workers == str(default) else ""
            if c.mean_epoch_s is None or best is None:
                lines.append(f"| {fw} | {c.workers}{mark} | {c.status} | - | - |")
                continue
            wait = "-" if c.data_wait_pct is None else f"{c.data_wait_pct:.0f}"
            lines.append(f"| {fw} | {c.workers}{mark} | {c.mean_epoch_s:.2f} | {wait} | {c.mean_epoch_s / best:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS), choices=FRAMEWORKS)
    p.add_argument("--workers", nargs="+", default=["0", "1", "2"], help="worker counts to try (default 0 1 2)")
    p.add_argument("--model", default="mobilenet_v2")
    p.add_argument("--dataset", default="small")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--limit", type=int, default=32)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1, help="leading epochs left out of the mean (default 1)")
    p.add_argument("--threads", type=int, help="intra-op threads for every framework")
    p.add_argument("--out", type=Path, help="where run folders go (default: a temporary folder)")
    args = p.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="loader-sweep-"))
    started = time.monotonic()
    cells = []
    for fw in args.frameworks:
        for workers in args.workers + ([AUTOTUNE] if fw == "tensorflow" else []):
            cell = run_cell(args, out, fw, workers)
            cells.append(cell)
            print(f"{fw:10} workers {workers:8} {cell.status} {cell.mean_epoch_s}", file=sys.stderr, flush=True)
    default = default_loader_workers()
    print(
        f"{platform.system()} {platform.machine()}, {cpu_model()}, {os.cpu_count()} CPUs; {args.model} on "
        f"{args.dataset}, --limit {args.limit}, {args.image_size} px, batch {args.batch}, {args.epochs} epochs "
        f"(first {args.warmup} left out); default loader workers here: {default}; "
        f"{time.monotonic() - started:.0f} s in all.\n"
    )
    print(markdown(cells, default))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
