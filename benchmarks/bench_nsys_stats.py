"""End to end CUDA API summary against `nsys stats` itself, on the same nsys export, in the same run.

    ~/.cache/dl-tracer/venv/bin/python benchmarks/bench_nsys_stats.py [--rows 5000000 50000000] [--repeat 2] [--hog]

The file is the con_kernel fixture (a real nsys export) with its runtime table replicated to --rows
rows (`tests/analyzers/nsys_replica.py`; kept as /tmp/nsys_replica_<rows>.sqlite for reruns). Timed,
each as a child process of its own (wall time, CPU time user + system, and peak RSS as ru_maxrss of RUSAGE_CHILDREN in a
wrapper that runs only that command):
  nsys:  `nsys stats --report cudaapisum --format csv --force-export false FILE`
  ours:  `tracer analyze FILE --format csv` with an empty cache: every summary (CUDA API, kernels,
         memory operations, threads) straight from the file, start-up included, as a user runs it
         (Python's bytecode cache in use: PYTHONDONTWRITEBYTECODE is dropped and the cache kept in a
         scratch PYTHONPYCACHEPREFIX, warmed by one call first); then the same command again (cached).
The two alternate, `--repeat` times each; the CUDA API rows are checked equal (total, calls, median,
min, max to the nanosecond). The machine, `uptime` before and after and the date are printed: the
machine may be shared. `--hog` runs one busy-looping Python process throughout (the issue's "one CPU
hog" load), ended by its pid at the end. Skipped, with the reason, when no nsys is found.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cpu_hog import cpu_hog  # noqa: E402

from tests.analyzers.nsys_replica import replicate  # noqa: E402
from tracer.measure.tracing.nsys import nsys_if_any  # noqa: E402

FIXTURE = ROOT / "tests/data/fixtures/extra-p/con_kernel.sqlite"

WRAP = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - t
use = resource.getrusage(resource.RUSAGE_CHILDREN)
rss, cpu = use.ru_maxrss * 1024, use.ru_utime + use.ru_stime
print(json.dumps({"wall": wall, "rss": rss, "cpu": cpu, "rc": p.returncode, "out": p.stdout, "err": p.stderr[-2000:]}))
"""


@dataclass(frozen=True)
class Measured:
    wall_s: float
    cpu_s: float
    rss_bytes: int
    out: str

    @property
    def rss_mib(self) -> float:
        return self.rss_bytes / 2**20


def measured(cmd: list[str], env: dict[str, str] | None = None) -> Measured:
    """`cmd` run under a wrapper process of its own: its wall time and its peak RSS alone."""
    proc = subprocess.run([sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True, env=env, check=True)
    res = json.loads(proc.stdout)
    if res["rc"] != 0:
        raise SystemExit(f"{cmd[0]} failed: {res['err']}")
    return Measured(float(res["wall"]), float(res["cpu"]), int(res["rss"]), str(res["out"]))


def nsys_rows(out: str) -> list[tuple[str, int, int, float, int, int]]:
    rows = list(csv.DictReader(io.StringIO(out[out.index('"Time') if '"Time' in out else out.index("Time") :])))
    return [
        (
            r["Name"],
            int(r["Total Time (ns)"]),
            int(r["Num Calls"]),
            float(r["Med (ns)"]),
            int(r["Min (ns)"]),
            int(r["Max (ns)"]),
        )
        for r in rows
    ]


def our_rows(out: str) -> list[tuple[str, int, int, float, int, int]]:
    return [
        (r["name"], int(r["total_ns"]), int(r["calls"]), float(r["med_ns"]), int(r["min_ns"]), int(r["max_ns"]))
        for r in csv.DictReader(io.StringIO(out))
        if r["section"] == "cuda_api"
    ]


def machine() -> str:
    model = next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in ln),
        "unknown CPU",
    )
    return (
        f"{os.cpu_count()} CPUs ({model}), {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB"
    )


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[5_000_000, 50_000_000])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--hog", action="store_true", help="one CPU-bound Python process running throughout")
    args = ap.parse_args()
    nsys = str(nsys_if_any() or "")
    if not nsys:
        print("skipped: no nsys found (scripts/install_nsys.sh puts Debian's in ~/.cache/dl-tracer/nsys)")
        return 0
    version = subprocess.run([nsys, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}; {version}")
    pycache = Path(tempfile.mkdtemp(prefix="bench-pycache-"))
    user_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    user_env |= {"PYTHONPYCACHEPREFIX": str(pycache), "PYTHONPATH": str(ROOT)}
    try:
        with cpu_hog(args.hog) as hog:
            print(f"load: {'one CPU hog running' if hog else 'no hog'}; {uptime()}")
            for rows in args.rows:
                _bench(nsys, rows, args.repeat, user_env)
    finally:
        shutil.rmtree(pycache, ignore_errors=True)
    return 0


def _bench(nsys: str, rows: int, repeat: int, user_env: dict[str, str]) -> None:
    db = replicate(FIXTURE, Path(tempfile.gettempdir()) / f"nsys_replica_{rows}.sqlite", rows)
    print(f"\n{rows:,} runtime rows, {db.stat().st_size / 1e6:.0f} MB; {uptime()}")
    cmd = [sys.executable, "-m", "tracer", "analyze", str(db), "--format", "csv"]
    warm = Path(tempfile.mkdtemp(prefix="bench-tracer-cache-"))
    subprocess.run([*cmd[:4], str(FIXTURE)], env=user_env | {"TRACER_CACHE": str(warm)}, capture_output=True)
    shutil.rmtree(warm)  # the bytecode cache is warm now, as on a user's machine after the first use
    results: dict[str, list[Measured]] = {"nsys": [], "ours": [], "again": []}
    for _ in range(repeat):
        theirs = measured(
            [nsys, "stats", "--report", "cudaapisum", "--format", "csv", "--force-export", "false", str(db)]
        )
        cache = Path(tempfile.mkdtemp(prefix="bench-tracer-cache-"))
        env = user_env | {"TRACER_CACHE": str(cache)}
        ours = measured(cmd, env)
        again = measured(cmd, env)
        shutil.rmtree(cache)
        assert our_rows(ours.out) == nsys_rows(theirs.out) == our_rows(again.out), "summaries differ"
        for key, m in (("nsys", theirs), ("ours", ours), ("again", again)):
            results[key].append(m)
        print(
            f"  nsys stats {theirs.wall_s:6.2f} s (CPU {theirs.cpu_s:5.2f} s) {theirs.rss_mib:4.0f} MiB | "
            f"tracer analyze {ours.wall_s:6.2f} s (CPU {ours.cpu_s:5.2f} s) {ours.rss_mib:4.0f} MiB | "
            f"{theirs.wall_s / ours.wall_s:4.2f}x faster ({theirs.cpu_s / ours.cpu_s:4.2f}x less CPU), "
            f"{ours.rss_bytes / theirs.rss_bytes:4.2f} of its RSS | again (cached) {again.wall_s:5.2f} s "
            f"(CPU {again.cpu_s:4.2f} s)"
        )
    best = {k: min(r.wall_s for r in v) for k, v in results.items()}
    cpu = {k: min(r.cpu_s for r in v) for k, v in results.items()}
    peak = {k: max(r.rss_mib for r in v) for k, v in results.items()}
    print(
        f"  best of {repeat}: nsys {best['nsys']:.2f} s (CPU {cpu['nsys']:.2f} s), ours {best['ours']:.2f} s "
        f"(CPU {cpu['ours']:.2f} s) = {best['nsys'] / best['ours']:.2f}x wall, {cpu['nsys'] / cpu['ours']:.2f}x CPU; "
        f"peak RSS nsys {peak['nsys']:.0f} MiB, ours {peak['ours']:.0f} MiB = {peak['ours'] / peak['nsys']:.2f}; "
        f"second call {best['again']:.2f} s; summaries equal"
    )
    print(f"  {uptime()}")


if __name__ == "__main__":
    raise SystemExit(main())
