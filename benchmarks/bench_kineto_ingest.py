"""Kineto ingest of a large generated trace against HolisticTraceAnalysis' parser (pip
`holistictraceanalysis`, a benchmark-only install). Each parser runs in its own child process so
wall time and peak RSS (ru_maxrss) are its own.

    ~/.cache/dl-tracer/venv/bin/python benchmarks/bench_kineto_ingest.py [--copies 10] [--hta-python PY] [--hog]

Three children: our parse alone (`kineto.read_json`), `tracer import TRACE` as a user runs it (interpreter
start, parse and the Parquet tables written; bytecode cache warm), and HTA's `parse_trace_file`, run by
--hta-python (a Python with `holistictraceanalysis` installed: a benchmark-only peer, best kept in a
virtual environment of its own, e.g. `python -m venv /tmp/hta && /tmp/hta/bin/pip install
holistictraceanalysis==0.5.0`). Printed: wall, CPU and peak RSS of each, MB/s of JSON, the ratios against
HTA measured in the same run, the date and `uptime` before and after. `--hog` runs one busy-looping
Python process throughout (the issue's "one CPU hog" load).

The trace is the kineto-h100 fixture's events repeated `--copies` times, shifted in time (and in
correlation id) so it reads as one long run; written as plain JSON (HTA reads .json and .json.gz).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cpu_hog import cpu_hog

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests/data/fixtures/kineto-h100/resnet50_bs100_train_torch2.11.json.gz"

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


def run_child(code: str, python: str = sys.executable) -> tuple[float, float, str, float]:
    """(wall s, peak RSS MiB, stdout, CPU s) of `python -c code` in a fresh process.

    Peak RSS is the child's VmHWM: ru_maxrss would not do, Linux carries it across fork + exec, so a
    child would report this parent's peak (the whole generated trace held as Python objects)."""
    wrapper = code + (
        "\nimport re; print('MAXRSS', re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
    )
    return timed([python, "-c", wrapper])


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str, float]:
    """`run_child`'s figures for any command that prints `MAXRSS <kB>` (else RSS from ru_maxrss of a
    wrapper that runs only it)."""
    wrap = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter(); p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(time.perf_counter() - t, u.ru_utime + u.ru_stime, u.ru_maxrss, p.returncode)\n"
        "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr[-3000:])\n"
    )
    proc = subprocess.run([sys.executable, "-c", wrap, *cmd], capture_output=True, text=True, env=env)
    head, _, out = proc.stdout.partition("\n")
    wall, cpu, maxrss, rc = head.split()
    if int(rc) != 0:
        return float(wall), float("nan"), (proc.stderr.strip().splitlines() or ["failed"])[-1], float(cpu)
    hwm = [int(line.split()[1]) for line in out.splitlines() if line.startswith("MAXRSS")]
    rss = (hwm[0] if hwm else int(maxrss)) / 1024
    return float(wall), rss, (out.splitlines() or [""])[0], float(cpu)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--hta-python", default=sys.executable, help="a Python that has holistictraceanalysis")
    ap.add_argument("--hog", action="store_true", help="one CPU-bound Python process running throughout")
    args = ap.parse_args()

    def up() -> str:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if "model name" in ln), "unknown CPU")
    with cpu_hog(args.hog) as hog:
        print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} CPUs ({model}); hog: {hog}")
        print(f"load: {up()}")
        with tempfile.TemporaryDirectory() as tmp:
            _bench(Path(tmp), args.copies, args.hta_python)
    print(f"after: {up()}")
    return 0


def _bench(tmp: Path, copies: int, hta_python: str) -> None:
    path = tmp / "big_trace.json"
    n = generate(path, copies)
    size_mb = path.stat().st_size / 1e6
    print(f"trace: {n:,} events, {size_mb:.0f} MB JSON")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONPYCACHEPREFIX": str(tmp / "pycache"), "PYTHONPATH": str(ROOT)}
    tracer_import = [sys.executable, "-m", "tracer", "import", str(path)]
    timed([*tracer_import[:4], str(FIXTURE), "--out", str(tmp / "warm")], env)  # bytecode cache warm, as a user's
    rows = {
        "ours, parse (Arrow pieces)": run_child(OURS.format(root=str(ROOT), path=str(path))),
        "ours, tracer import": timed([*tracer_import, "--out", str(tmp / "runs")], env),
        "HTA parse_trace_file": run_child(HTA.format(path=str(path)), hta_python),
    }
    for label, (wall, rss, out, cpu) in rows.items():
        print(
            f"{label:30s} {wall:6.1f} s wall {cpu:6.1f} s CPU  peak RSS {rss:6.0f} MiB  "
            f"{size_mb / wall:6.1f} MB/s, {size_mb / cpu:6.1f} MB per CPU s ({out})"
        )
    hta = rows["HTA parse_trace_file"]
    if hta[1] == hta[1]:
        for label in list(rows)[:2]:
            wall, rss, _, cpu = rows[label]
            print(
                f"{label}: {hta[0] / wall:.2f}x HTA's wall, {hta[3] / cpu:.2f}x its CPU, "
                f"{rss / hta[1]:.2f} of its memory"
            )


if __name__ == "__main__":
    raise SystemExit(main())
