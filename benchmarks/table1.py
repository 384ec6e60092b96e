"""The study's Table 1 on this machine: mean epoch time (s) on CPU per framework x model x dataset
(small/big) at batch 1 and batch 100, each cell one real `tracer profile` run.

    python benchmarks/table1.py --limit 100 --image-size 64 --models mobilenet_v2 resnet50

`--limit N` trains on the first N images of each set (balanced across classes), so that the table fits
a small machine; with a limit, "small" and "big" differ only in which generated set the N images come
from, not in how many there are. A run that fails (a framework crash, a rejected setting) is a cell
that says so (the study saw MXNet and Paddle crash at batch 100), not a missing row.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from analyzers.figures.steady import throughput
from tracer.core.frameworks import FRAMEWORKS as DECLARED
from tracer.core.options import MODELS
from tracer.core.runfolder import list_runs
from tracer.measure.sysinfo import cpu_model

FRAMEWORKS = tuple(DECLARED)  # every declared framework (tracer.core.frameworks)


@dataclass(frozen=True)
class Cell:
    framework: str
    model: str
    dataset: str
    batch: int
    status: str
    mean_epoch_s: float | None
    run_dir: str

    def text(self) -> str:
        if self.status == "ok" and self.mean_epoch_s is not None:
            return f"{self.mean_epoch_s:.2f}"
        return self.status


def run_cell(args: argparse.Namespace, out: Path, framework: str, model: str, dataset: str, batch: int) -> Cell:
    folder_out = out / f"{framework}-{model}-{dataset}-b{batch}"
    cmd = [sys.executable, "-m", "tracer", "profile", "--framework", framework, "--model", model]
    cmd += ["--dataset", dataset, "--batch", str(batch), "--epochs", str(args.epochs), "--limit", str(args.limit)]
    cmd += ["--image-size", str(args.image_size), "--out", str(folder_out)]
    if args.timeout:
        cmd += ["--timeout", str(args.timeout)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    runs = list_runs(folder_out) if folder_out.exists() else []
    if not runs:  # refused before a run folder existed (e.g. framework not installed): exit code 2
        reason = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit {result.returncode}"
        status = "not installed" if "not installed" in reason else "refused"
        return Cell(framework, model, dataset, batch, status, None, "")
    folder = runs[-1]
    record = folder.read_record()
    cell = throughput([folder.epochs()], args.warmup)  # the one Table 1 definition (report, campaign, here)
    mean = cell.epoch_s.median if cell.epoch_s else None
    return Cell(framework, model, dataset, batch, record.outcome.status.value, mean, str(folder.path))


def markdown(cells: list[Cell], datasets: list[str], batches: list[int]) -> str:
    columns = [(d, b) for d in datasets for b in batches]
    header = "| framework | model | " + " | ".join(f"{d} b{b}" for d, b in columns) + " |"
    lines = [header, "|" + " --- |" * (2 + len(columns))]
    by_key = {(c.framework, c.model, c.dataset, c.batch): c for c in cells}
    for fw in dict.fromkeys(c.framework for c in cells):
        for model in dict.fromkeys(c.model for c in cells):
            row = [by_key[(fw, model, d, b)].text() if (fw, model, d, b) in by_key else "" for d, b in columns]
            lines.append(f"| {fw} | {model} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS[:4]), choices=FRAMEWORKS)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--datasets", nargs="+", default=["small", "big"])
    p.add_argument("--batches", nargs="+", type=int, default=[1, 100])
    p.add_argument("--limit", type=int, default=200, help="images per epoch from each set (default 200)")
    p.add_argument("--epochs", type=int, default=2, help="epochs per run (default 2)")
    p.add_argument("--warmup", type=int, default=1, help="leading epochs left out of the mean (default 1)")
    p.add_argument("--image-size", type=int, default=224, help="input side in pixels (the study's 224)")
    p.add_argument("--threads", type=int, help="intra-op threads for every framework (default: each one's own)")
    p.add_argument("--timeout", type=float, help="per-run limit in seconds (the cell then reads 'timeout')")
    p.add_argument("--out", type=Path, help="where run folders go (default: a temporary folder)")
    p.add_argument("--csv", type=Path, help="also write the cells as CSV")
    args = p.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="table1-"))
    cells = []
    started = time.monotonic()
    for fw in args.frameworks:
        for model in args.models:
            for dataset in args.datasets:
                for batch in args.batches:
                    cell = run_cell(args, out, fw, model, dataset, batch)
                    cells.append(cell)
                    print(f"{fw:10} {model:12} {dataset:5} b{batch:<4} {cell.text()}", file=sys.stderr, flush=True)
    if args.csv:
        with args.csv.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["framework", "model", "dataset", "batch", "status", "mean_epoch_s", "run_dir"])
            for c in cells:
                writer.writerow([c.framework, c.model, c.dataset, c.batch, c.status, c.mean_epoch_s, c.run_dir])
    print(
        f"Mean epoch time (s) on CPU, {platform.system()} {platform.machine()}, {cpu_model()}, {os.cpu_count()} CPUs; "
        f"--limit {args.limit} images, {args.image_size} px, {args.epochs} epochs "
        f"(first {args.warmup} left out of the mean), intra-op threads: {args.threads or 'framework default'}; "
        f"{time.monotonic() - started:.0f} s in all.\n"
    )
    print(markdown(cells, args.datasets, args.batches))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
