"""Consecutive tiny Paddle runs with a DataLoader process, each a real `tracer profile`: how many end ok,
how many crash, hang (stalled) or time out (issue 27, item 1: Paddle's loader deadlocked or segfaulted
about one run in three, forked from a worker that had already started threads).

    python benchmarks/paddle_loader_loop.py [--runs 50] [--keep DIR] [--workers 1] [--stall-after S]

Prints one line per run and a tally; exits 1 if any run did not end ok.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--model", "mobilenet_v2", "--dataset", "small", "--epochs", "1", "--limit", "8", "--image-size", "64"]
RUN_TIMEOUT_S = 600  # per run, well past the loader's stall limit, so a hang shows as `stalled`


def one_run(out: Path, workers: int, stall_after: float | None = None) -> tuple[str, str, float]:
    """(status, cause, seconds) of one run; 'hung' when even the tracer did not end within RUN_TIMEOUT_S."""
    cmd = [sys.executable, "-m", "tracer", "profile", "--framework", "paddle", *TINY, "--workers", str(workers)]
    if stall_after is not None:
        cmd += ["--stall-after", str(stall_after)]
    started = time.monotonic()
    try:
        subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return "hung", f"tracer profile still running after {RUN_TIMEOUT_S} s", time.monotonic() - started
    records = sorted(out.glob("*/run.json"))
    if not records:
        return "no-run", "no run folder", time.monotonic() - started
    outcome = json.loads(records[-1].read_text())["outcome"]
    return outcome["status"], outcome.get("cause", ""), time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--workers", type=int, default=1, help="paddle.io.DataLoader processes (default 1)")
    parser.add_argument("--keep", type=Path, help="keep the run folders here")
    parser.add_argument("--stall-after", type=float, help="tracer profile --stall-after (default: its own)")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="paddle-loop-"))
    tally: collections.Counter[str] = collections.Counter()
    times = []
    for i in range(1, args.runs + 1):
        status, cause, seconds = one_run(base / f"run{i:03d}", args.workers, args.stall_after)
        tally[status] += 1
        times.append(seconds)
        print(f"{i:3d}/{args.runs} {status:9s} {seconds:6.1f} s {cause[:120]}", flush=True)
    print(f"{args.runs} runs, workers {args.workers}: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    print(f"seconds per run: min {min(times):.1f}, max {max(times):.1f}; folders in {base}")
    return 0 if tally["ok"] == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
