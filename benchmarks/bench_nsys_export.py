"""What `--trace nsys` does after a run, both ways: `nsys export` to Arrow + our Arrow ingest, against
`nsys export` to SQLite + our SQLite ingest, on the same report, in the same run. Each step runs in
a child process of its own (wall time; peak RSS of the ingest from its own VmHWM). The tables are
checked equal.

    ~/.cache/dl-tracer/venv/bin/python benchmarks/bench_nsys_export.py [--report R.nsys-rep] [--calls 100000]

Without `--report`, one is made: a Python process opening and reading a /proc file `--calls` times
under `nsys profile -t osrt` (three OS-runtime rows per call): CPU only, so it runs here.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

INGEST = """
import re, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from analyzers.ingest import nsys_arrow, nsys_duckdb
write = nsys_arrow.write_arrow if {kind!r} == "arrow" else nsys_duckdb.write_sqlite
names, _ = write(Path({path!r}), Path({out!r}))
print(",".join(names))
print("MAXRSS", re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
"""


def make_report(nsys: str, out: Path, calls: int) -> Path:
    code = f"for _ in range({calls}):\n    with open('/proc/self/stat') as f: f.read()"
    cmd = [nsys, "profile", "-t", "osrt", "--osrt-threshold=1", "-f", "true", "-o", str(out), sys.executable]
    subprocess.run([*cmd, "-c", code], capture_output=True, check=True, timeout=1800)
    return out.with_suffix(".nsys-rep")


def timed(cmd: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=1800)
    return time.perf_counter() - t0, done.stdout


def main() -> int:
    from tracer.measure.tracing.nsys import nsys_export_types, nsys_if_any

    ap = argparse.ArgumentParser()
    ap.add_argument("--report", type=Path)
    ap.add_argument("--calls", type=int, default=100_000)
    args = ap.parse_args()
    nsys = str(nsys_if_any() or "")
    if not nsys or "arrow" not in nsys_export_types(nsys):
        print("skipped: no nsys with an Arrow export here (scripts/install_nsys.sh installs Debian's 2022.4)")
        return 0
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        report = args.report or make_report(nsys, Path(tmp) / "bench", args.calls)
        results = {}
        for kind in ("arrow", "sqlite"):
            export, out = Path(tmp) / f"export.{kind}", Path(tmp) / f"out-{kind}"
            out.mkdir()
            export_cmd = [nsys, "export", "-q", "true", "-f", "true", "-t", kind, "-o", str(export), str(report)]
            export_s, _ = timed(export_cmd)
            code = INGEST.format(root=str(ROOT), kind=kind, path=str(export), out=str(out))
            ingest_s, stdout = timed([sys.executable, "-c", code])
            lines = stdout.splitlines()
            rss = int(lines[-1].split()[1]) / 1024
            names = lines[0].split(",")
            rows = sum(pq.ParquetFile(out / f"{n}.parquet").metadata.num_rows for n in names)
            size = export.stat().st_size / 1e6
            results[kind] = (export_s, ingest_s, rss, out, names)
            print(
                f"{kind:6}  export {export_s:6.2f} s ({size:6.1f} MB)  ingest {ingest_s:6.2f} s  "
                f"peak RSS {rss:5.0f} MiB  total {export_s + ingest_s:6.2f} s  ({rows:,} rows: {', '.join(names)})"
            )
        (ea, ia, _, out_a, names_a), (es, is_, _, out_s, names_s) = results["arrow"], results["sqlite"]
        assert names_a == names_s
        for n in names_a:
            a, s = pq.read_table(out_a / f"{n}.parquet"), pq.read_table(out_s / f"{n}.parquet")
            keys = [(c, "ascending") for c in a.column_names]
            assert a.sort_by(keys).equals(s.sort_by(keys)), n
        print(
            f"tables equal; Arrow path {(es + is_) / (ea + ia):.2f}x faster end to end (export {es / ea:.2f}x, "
            f"ingest {is_ / ia:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
