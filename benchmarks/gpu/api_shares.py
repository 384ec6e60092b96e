"""The CUDA API shares of two traced runs of one workload, side by side: issue 43's check that a CUPTI
run's shares equal an nsys run's within 1 percentage point for every call above 1 %.

    PYTHONPATH=. python benchmarks/gpu/api_shares.py NSYS_RUN CUPTI_RUN [--phase steady] [--above 1] [--within 1]

Shares are taken over the calls both traces hold (`analyzers.comparison.compare.cuda_differences` says
why: an nsys report leaves out cudaFuncGetAttributes and other queries, the CUPTI collector the calls Kineto
switches off), over one phase of each run (steady by default: the epochs after the warm-up). Exit status
1 where a call above `--above` % in either run differs by more than `--within` points.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analyzers.comparison.compare import matched_totals_ns
from analyzers.summaries.cuda_api import api_tracer, phase_summaries
from tracer.core.runfolder import RunFolder


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs=2, type=Path, help="two run folders traced with CUDA API tables")
    p.add_argument("--phase", default="steady", help="whole, startup, warmup, steady, teardown or 'epoch N'")
    p.add_argument("--above", type=float, default=1.0, help="calls whose share (%%) is above this in either run")
    p.add_argument("--within", type=float, default=1.0, help="largest difference allowed, in percentage points")
    args = p.parse_args(argv)
    folders = [RunFolder(r) for r in args.runs]
    a, b = (matched_totals_ns(phase_summaries(f)[args.phase]) for f in folders)
    if not a or not b:
        print(f"no CUDA API calls in the {args.phase} phase of {args.runs[0 if not a else 1]}")
        return 2
    both = set(a) & set(b)
    sum_a, sum_b = sum(a[n] for n in both), sum(b[n] for n in both)
    names = [api_tracer(f) for f in folders]
    print(f"{args.phase} phase; shares over the {len(both)} calls both traces hold")
    print(f"left out: {len(set(a) - both)} calls only {names[0]} holds, {len(set(b) - both)} only {names[1]}")
    print(f"| call | {names[0]} % | {names[1]} % | difference (points) |")
    print("| --- | ---: | ---: | ---: |")
    worst = 0.0
    for name in sorted(both, key=lambda n: -max(a[n] / sum_a, b[n] / sum_b)):
        x, y = 100 * a[name] / sum_a, 100 * b[name] / sum_b
        if max(x, y) <= args.above:
            continue
        worst = max(worst, abs(y - x))
        print(f"| {name} | {x:.2f} | {y:.2f} | {y - x:+.2f} |")
    verdict = "within" if worst <= args.within else "NOT within"
    print(f"largest difference {worst:.2f} points: {verdict} {args.within} of each other")
    return 0 if worst <= args.within else 1


if __name__ == "__main__":
    sys.exit(main())
