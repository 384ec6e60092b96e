"""Does the tracer's own cost stay flat as a run gets long? A time-compressed long run: a tiny PyTorch
CPU training sampled at 100 Hz for a few minutes (at 10 Hz, 6 minutes of rows are an hour's worth),
watched from outside: the tracer process's resident memory (its own, not the worker's), its CPU share
(all its threads: the sampler, the progress view, the runner's loop) and the run folder's growth.

    python benchmarks/bench_long_run.py [--minutes 6] [--hz 100] [--points 1,3,6] [--source DIR]

Prints, at each point: the tracer's RSS now and its peak so far, its CPU share over the interval
that ends there, and the run folder's size and growth per hour; then the peak over the whole life
(its end included: the end converts the sample tables) and the sampler's figures from run.json.
Goal: RSS and CPU share within 10 % between the middle point and the end. `--source` runs another
checkout's tracer (e.g. an export of an older commit) for a before/after comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

POLL_S = 0.2
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Point:
    minute: float
    rss_mib: float
    peak_mib: float
    cpu_share_pct: float
    folder_mib: float
    folder_mib_per_h: float


def folder_mib(out: Path) -> float:
    return sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2**20


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=6.0)
    p.add_argument("--hz", type=float, default=100.0)
    p.add_argument("--points", default="1,3,6", help="minutes at which to report, comma-separated")
    p.add_argument("--source", type=Path, default=ROOT, help="the checkout whose tracer runs")
    p.add_argument("--model", default="mobilenet_v2")
    args = p.parse_args()
    points = [float(m) for m in args.points.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-long-") as tmp:
        out = Path(tmp)
        cmd = [
            sys.executable, "-m", "tracer", "profile", "--framework", "pytorch", "--model", args.model,
            "--dataset", "small", "--limit", "16", "--batch", "4", "--image-size", "32", "--epochs", "100000",
            "--sample-hz", str(args.hz), "--timeout", str(args.minutes * 60), "--out", str(out),
        ]  # fmt: skip
        env = dict(os.environ, PYTHONPATH=str(args.source))
        started = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=args.source, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        tracer = psutil.Process(proc.pid)
        peak = 0.0
        results: list[Point] = []
        last_cpu, last_t, last_size = 0.0, 0.0, 0.0
        end_peak = 0.0
        while proc.poll() is None:
            try:
                rss = tracer.memory_info().rss / 2**20
                times = tracer.cpu_times()
            except psutil.Error:
                break
            peak = max(peak, rss)
            elapsed = time.monotonic() - started
            if elapsed > args.minutes * 60:
                end_peak = max(end_peak, rss)
            if points and elapsed >= points[0] * 60:
                cpu = times.user + times.system
                size = folder_mib(out)
                dt = elapsed - last_t
                results.append(
                    Point(points.pop(0), rss, peak, 100 * (cpu - last_cpu) / dt, size, (size - last_size) * 3600 / dt)
                )
                last_cpu, last_t, last_size = cpu, elapsed, size
                r = results[-1]
                print(
                    f"{r.minute:5.1f} min: tracer RSS {r.rss_mib:6.1f} MiB (peak {r.peak_mib:6.1f}), "
                    f"CPU {r.cpu_share_pct:5.2f} % of a core, folder {r.folder_mib:7.1f} MiB "
                    f"(+{r.folder_mib_per_h:7.1f} MiB/h)",
                    flush=True,
                )
            time.sleep(POLL_S)
        proc.wait()
        (run,) = [d for d in out.iterdir() if d.is_dir()]
        record = json.loads((run / "run.json").read_text())
        sampling, cost = record["sampling"], record.get("measurement_cost") or {}
        print(f"peak tracer RSS over its life {peak:.1f} MiB; after training ended (finalising) {end_peak:.1f} MiB")
        print(
            f"samples {sampling['samples']} at {args.hz:g} Hz (period {sampling['achieved_period_ms']} ms), "
            f"sampler CPU {cost.get('sampler_cpu_s')} s = {cost.get('sampler_pct_of_wall')} % of wall; "
            f"final folder {folder_mib(out):.1f} MiB, status {record['outcome']['status']}"
        )
        if len(results) >= 2:
            mid, end = results[len(results) // 2 - (len(results) % 2 == 0)], results[-1]
            print(
                f"middle -> end: RSS {100 * (end.rss_mib / mid.rss_mib - 1):+.1f} %, "
                f"CPU share {100 * (end.cpu_share_pct / mid.cpu_share_pct - 1):+.1f} % (goal: within 10 %)"
            )


if __name__ == "__main__":
    main()
