"""JSON parsers on the Kineto benchmark trace: which could carry a 100 MB/s ingest (issue #42 item 2).

    ~/.cache/dl-tracer/venv/bin/python benchmarks/bench_json_parsers.py [--copies 10] [--extra /tmp/parsers]

The trace is `bench_kineto_ingest.generate`'s (the kineto-h100 fixture repeated: 167 MB, 784 k events at
--copies 10). Each parser runs in a child process of its own; wall time, CPU time and peak RSS (VmHWM)
are its own, and MB/s is the trace's size over the wall time. Each reads every event's `ts`, `dur`,
`name` and `cat` (the least any ingest needs), so a lazy parser pays for what it hands over:
  arrow-pieces     what `tracer import` uses since issue #42 (`analyzers.ingest.trace_events.arrow_piece`:
                   2 MB pieces read by pyarrow's C++ reader into Arrow columns, every field the tables use,
                   two pieces at once in threads)
  msgspec-chunks   the fallback (and the ingest before): typed records, 1 MB pieces
  msgspec-whole    the same records from one decode of the whole file (no bound on memory)
  orjson           `orjson.loads` of the whole file (a dict per event)
  simdjson         pysimdjson's parser, fields read through its lazy proxies
  pyarrow-ndjson   pyarrow's multi-threaded JSON reader over the events written one a line (the
                   conversion is not timed: an upper bound for a C++ reader, not a path we have)
  duckdb           DuckDB's read_json of the file, `traceEvents` unnested (the whole document at once)
orjson and pysimdjson are benchmark-only peers, not dependencies: install them into a folder of their
own (`pip install --target /tmp/parsers orjson pysimdjson`) and name it with --extra. A parser that is
not installed is reported as such. `uptime` and the date are printed: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_kineto_ingest import generate  # noqa: E402

PARSERS = {
    "arrow-pieces": """
from concurrent.futures import ThreadPoolExecutor
from analyzers.ingest.trace_events import TraceEvents, arrow_piece, decode_piece
def decode(piece):
    events = arrow_piece(piece)
    return decode_piece(piece) if events is None else events
n = 0
with open(PATH, "rb") as f, ThreadPoolExecutor(2) as pool:
    for events in TraceEvents(f, decode, 2 << 20, pool):
        if isinstance(events, list):
            n += sum(e.ts is not None and e.dur is not None and bool(e.name) and e.cat is not None for e in events)
        else:
            n += len(events) - events.field("dur").null_count
""",
    "msgspec-chunks": """
from analyzers.ingest.trace_events import TraceEvents
n = 0
with open(PATH, "rb") as f:
    for events in TraceEvents(f):
        for e in events:
            n += e.ts is not None and e.dur is not None and bool(e.name) and e.cat is not None
""",
    "msgspec-whole": """
import msgspec
from analyzers.ingest.trace_events import Event
class Doc(msgspec.Struct):
    traceEvents: list[Event]
with open(PATH, "rb") as f:
    doc = msgspec.json.decode(f.read(), type=Doc)
n = sum(e.ts is not None and e.dur is not None and bool(e.name) and e.cat is not None for e in doc.traceEvents)
""",
    "orjson": """
import orjson
with open(PATH, "rb") as f:
    doc = orjson.loads(f.read())
n = sum("ts" in e and "dur" in e and bool(e.get("name")) and "cat" in e for e in doc["traceEvents"])
""",
    "simdjson": """
import simdjson
with open(PATH, "rb") as f:
    doc = simdjson.Parser().parse(f.read())
n = 0
for e in doc["traceEvents"]:
    n += e.get("ts") is not None and e.get("dur") is not None and bool(e.get("name")) and e.get("cat") is not None
""",
    "pyarrow-ndjson": """
import pyarrow as pa, pyarrow.json as pj
fields = pa.schema([("ts", pa.float64()), ("dur", pa.float64()), ("name", pa.string()), ("cat", pa.string())])
opts = pj.ParseOptions(explicit_schema=fields, unexpected_field_behavior="ignore")
table = pj.read_json(NDJSON, parse_options=opts)
n = table.num_rows - table["dur"].null_count
""",
    "duckdb": """
import duckdb
con = duckdb.connect()
n = con.execute(
    "SELECT count(e.dur) FROM (SELECT unnest(traceEvents) AS e FROM read_json(?, maximum_object_size=2000000000, "
    "columns={'traceEvents': 'STRUCT(ph VARCHAR, cat VARCHAR, name VARCHAR, ts DOUBLE, dur DOUBLE)[]'}))",
    [PATH],
).fetchone()[0]
""",
}

CHILD = """
import sys, time, resource
sys.path[:0] = {paths!r}
PATH, NDJSON = {path!r}, {ndjson!r}
t0, c0 = time.perf_counter(), time.process_time()
{body}
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
import re
rss = int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024
print(wall, cpu, rss, n)
"""


def run(name: str, path: Path, ndjson: Path, extra: list[str]) -> str:
    code = CHILD.format(paths=[str(ROOT), *extra], path=str(path), ndjson=str(ndjson), body=PARSERS[name])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        return f"  {name:15s} not measured: {last[:150]}"
    wall, cpu, rss, n = proc.stdout.strip().splitlines()[-1].split()
    size = path.stat().st_size / 1e6
    return (
        f"  {name:15s} {float(wall):6.2f} s wall, {float(cpu):6.2f} s CPU, {float(rss):6.0f} MiB peak, "
        f"{size / float(wall):6.1f} MB/s ({int(float(n)):,} timed events)"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--extra", nargs="*", default=[], help="folders with the benchmark-only parsers")
    ap.add_argument("--only", nargs="*", default=list(PARSERS))
    args = ap.parse_args()
    up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} CPUs; {up}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big_trace.json"
        n = generate(path, args.copies)
        ndjson = Path(tmp) / "events.ndjson"
        with path.open("rb") as f:
            events = json.load(f)["traceEvents"]
        with ndjson.open("w") as out:
            for e in events:
                out.write(json.dumps(e) + "\n")
        del events
        print(f"trace: {n:,} events, {path.stat().st_size / 1e6:.0f} MB JSON")
        for name in args.only:
            print(run(name, path, ndjson, args.extra), flush=True)
    up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"after: {up}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
