"""Loader-only throughput: each framework's input pipeline exactly as its worker builds it, read without
training, at several worker counts; images/s and where the CPU goes (the training process's own CPU and
the loader processes' CPU, in ms per image).

    PYTHONPATH=. ~/.cache/dl-tracer/venv/bin/python benchmarks/loader_sweep.py --workers 1 2 4 8

Each cell is a probe run in the framework's own environment: it builds the worker's `Trainer` (model and
loader, as `tracer profile` does), swaps its training loop for one that only takes the batches, and
reads the epochs after the first (loader processes start in the first). The training process's CPU per
image bounds what any number of workers can give: a loop that spends c ms of its own CPU per image cannot
take more than 1000 / c images/s however many cores decode. The throughput ratios between frameworks
belong here, not in a timed test; on a machine with fewer cores than workers they show the mechanism
(how the work is split), not the speed a larger machine would reach.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tracer.core.frameworks import FRAMEWORKS
from tracer.measure import dataset
from tracer.measure.environments import env_python
from tracer.measure.process import worker_pythonpath
from tracer.measure.sysinfo import cpu_model

PROBE = r"""
import json, os, sys, time
from tracer.worker.base import EpochStats
from tracer.worker.registry import load_trainer
from tracer.worker.reporting import Reporter
from tracer.worker.workload import WorkloadConfig, list_images

spec = json.loads(sys.argv[1])
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(TICK)


def descendants(pid):
    found = []
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found + [g for c in found for g in descendants(c)]


def loader_cpu(me):
    # live loader processes from /proc, plus those that ended and were reaped (os.times)
    live = 0.0
    for pid in descendants(me):
        try:
            live += cpu_s(pid)
        except OSError:
            pass
    t = os.times()
    return live + t.children_user + t.children_system, live


cfg = WorkloadConfig(**spec)
trainer = load_trainer(cfg)(cfg, list_images(cfg.dataset_dir, cfg.limit), Reporter(os.devnull))
trainer.build()


seen = {}  # pid: (CPU s when first seen in the epoch, CPU s when last seen)


def only_load(epoch, batches, train_step, read):
    n = 0
    for batch in batches:
        n += int(batch[1].shape[0])
        for pid in descendants(me):  # while they run: some end with the epoch
            try:
                now = cpu_s(pid)
            except OSError:
                continue
            seen[pid] = (seen.get(pid, (now, now))[0], now)
    return EpochStats(n, 0.0)


trainer.run_epoch = only_load
me = os.getpid()
epochs = []
for epoch in range(1, cfg.epochs + 1):
    seen.clear()
    before, live_before = loader_cpu(me)
    own, t0 = cpu_s(me), time.perf_counter()
    images = trainer.train_epoch(epoch).images
    wall, own = time.perf_counter() - t0, cpu_s(me) - own
    after, _ = loader_cpu(me)
    busy = sum(1 for first, last in seen.values() if last > first)
    epochs.append({"images": images, "wall_s": wall, "own_cpu_s": own, "loader_cpu_s": after - before, "procs": busy})
print(json.dumps(epochs))
"""


FAILED_TAIL_LINES = 30


@dataclass(frozen=True)
class Cell:
    framework: str
    workers: int
    status: str
    images_per_s: float | None = None
    own_ms_per_image: float | None = None  # the training process's CPU (all its threads)
    loader_ms_per_image: float | None = None  # the loader processes' CPU
    loader_processes: int | None = None  # processes of the tree seen gaining CPU while batches came
    # A failed cell's last stderr lines: its last line alone can be a shutdown warning (grain's leaked
    # shared memory at 15 workers on the H200 hid the error).
    stderr_tail: str = field(default="", repr=False)


def run_cell(args: argparse.Namespace, folder: str, framework: str, workers: int) -> Cell:
    spec = {
        "framework": framework,
        "model": args.model,
        "dataset_dir": folder,
        "batch": args.batch,
        "epochs": args.epochs,
        "limit": args.limit,
        "image_size": args.image_size,
        "workers": workers,
        "worker_module": FRAMEWORKS[framework].worker_module,
    }
    env = dict(os.environ, PYTHONPATH=str(worker_pythonpath()), TF_CPP_MIN_LOG_LEVEL="2")
    python = str(env_python(framework))
    result = subprocess.run(
        [python, "-c", PROBE, json.dumps(spec)], capture_output=True, text=True, env=env, cwd="/", timeout=args.timeout
    )
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or ["no output"]
        errors = [ln for ln in lines if "Error" in ln or "error:" in ln] or lines
        tail = "\n".join(lines[-FAILED_TAIL_LINES:])
        return Cell(framework, workers, f"failed (exit {result.returncode}): {errors[-1][:120]}", stderr_tail=tail)
    epochs = json.loads(result.stdout.strip().splitlines()[-1])[args.warmup :]
    images = sum(e["images"] for e in epochs)
    if not images:
        return Cell(framework, workers, "no epoch after the warm-up")
    return Cell(
        framework,
        workers,
        "ok",
        images / sum(e["wall_s"] for e in epochs),
        1000 * sum(e["own_cpu_s"] for e in epochs) / images,
        1000 * sum(e["loader_cpu_s"] for e in epochs) / images,
        max(e["procs"] for e in epochs),
    )


def markdown(cells: list[Cell]) -> str:
    lines = [
        "| framework | workers | images/s | training process CPU ms/image | loader processes | their CPU ms/image |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in cells:
        if c.status != "ok":
            lines.append(f"| {c.framework} | {c.workers} | {c.status} | - | - | - |")
            continue
        lines.append(
            f"| {c.framework} | {c.workers} | {c.images_per_s:.0f} | {c.own_ms_per_image:.2f} | "
            f"{c.loader_processes} | {c.loader_ms_per_image:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS), choices=list(FRAMEWORKS))
    p.add_argument("--workers", nargs="+", type=int, default=[1, 2, 4, 8], help="worker counts (default 1 2 4 8)")
    p.add_argument("--model", default="alexnet", help="built as a run builds it, never trained (default alexnet)")
    p.add_argument("--dataset", default="small", help="small, big or a folder (default small)")
    p.add_argument("--limit", type=int, default=400)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1, help="leading epochs left out (default 1: loader start-up)")
    p.add_argument("--timeout", type=float, default=900, help="seconds a cell may take")
    p.add_argument("--json", type=Path, help="also write the cells here")
    args = p.parse_args(argv)
    known = {"small", "big"}
    folder = str(dataset.ensure_generated(args.dataset) if args.dataset in known else Path(args.dataset))
    started = time.time()
    load_before = os.getloadavg()
    cells = []
    for fw in args.frameworks:
        for workers in args.workers:
            cell = run_cell(args, folder, fw, workers)
            cells.append(cell)
            print(f"{fw:10} workers {workers}: {cell}", file=sys.stderr, flush=True)
            if cell.stderr_tail:
                print(cell.stderr_tail, file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(started))
    print(
        f"{when} UTC, {(time.time() - started) / 60:.0f} min; {platform.system()} {platform.machine()}, {cpu_model()}, "
        f"{os.cpu_count()} CPUs; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after; "
        f"{args.model} built, {args.dataset}, --limit {args.limit}, {args.image_size} px, batch {args.batch}, "
        f"{args.epochs} passes (first {args.warmup} left out).\n"
    )
    print(markdown(cells))
    if args.json:
        args.json.write_text(json.dumps([asdict(c) for c in cells], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
