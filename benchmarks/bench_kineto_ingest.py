"""Kineto ingest of a large generated trace against HolisticTraceAnalysis' parser (pip
`holistictraceanalysis`, a benchmark-only install). Each parser runs in its own child process so
wall time and peak RSS (ru_maxrss) are its own.

    ~/.cache/dl-tracer/venv/bin/python benchmarks/bench_kineto_ingest.py [--copies 10]

The trace is the kineto-h100 fixture's events repeated `--copies` times, shifted in time (and in
correlation id) so it reads as one long run; written as plain JSON (HTA reads .json and .json.gz).
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT.parent / "shared/fixtures/kineto-h100/resnet50_bs100_train_torch2.11.json.gz"

OURS = """
import sys; sys.path.insert(0, {root!r})
from pathlib import Path
from analyzers.ingest.kineto import read_json
tables, _ = read_json(Path({path!r}))
print(sum(t.num_rows for t in tables.values()))
"""

HTA = """
from hta.common.trace import parse_trace_file
result = parse_trace_file({path!r})
print(type(result).__name__)
"""


def generate(out: Path, copies: int) -> int:
    with gzip.open(FIXTURE, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in events) - min(e.get("ts", 0) for e in events if "ts" in e)
    out_events = []
    for c in range(copies):
        for e in events:
            e2 = dict(e)
            if "ts" in e2:
                e2["ts"] = round(e2["ts"] + c * (span + 1000), 3)
            if isinstance(e2.get("args"), dict) and "correlation" in e2["args"]:
                e2["args"] = dict(e2["args"], correlation=e2["args"]["correlation"] + c * 10_000_000)
            if "id" in e2 and isinstance(e2["id"], int):
                e2["id"] += c * 10_000_000
            out_events.append(e2)
    doc["traceEvents"] = out_events
    out.write_text(json.dumps(doc))
    return len(out_events)


def run_child(code: str) -> tuple[float, float, str]:
    """(wall s, peak RSS MiB, stdout) of `python -c code` in a fresh process.

    Peak RSS is the child's VmHWM: ru_maxrss would not do, Linux carries it across fork + exec, so a
    child would report this parent's peak (the whole generated trace held as Python objects)."""
    wrapper = code + (
        "\nimport re; print('MAXRSS', re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
    )
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return wall, float("nan"), proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
    rss = [int(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("MAXRSS")][0]
    return wall, rss / 1024, proc.stdout.splitlines()[0]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big_trace.json"
        n = generate(path, args.copies)
        size_mb = path.stat().st_size / 1e6
        print(f"trace: {n:,} events, {size_mb:.0f} MB JSON")
        ours = run_child(OURS.format(root=str(ROOT), path=str(path)))
        print(f"ours (msgspec chunks):{ours[0]:6.1f} s  peak RSS {ours[1]:7.0f} MiB  ({ours[2]} CUDA rows)")
        hta = run_child(HTA.format(path=str(path)))
        print(f"HTA TraceAnalysis:    {hta[0]:6.1f} s  peak RSS {hta[1]:7.0f} MiB  ({hta[2]})")
        if hta[1] == hta[1]:
            print(f"speed-up {hta[0] / ours[0]:.2f}x, memory ratio ours/HTA {ours[1] / hta[1]:.2f}")
    _ = resource
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
