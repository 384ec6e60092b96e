"""Scheduling overhead per run of a campaign under Ray (and Slurm) against the local runner, same tiny plan.

Overhead per run = (campaign wall time - sum of the runs' own wall times in run.json) / runs: the time a
runner spends outside `tracer profile`'s run (starting the profile process, placing the task, moving and
recording the run folder). The Ray cluster here has a single `tracer_node`, so its runs are sequential as
the local runner's are, and the two wall times compare. With --slurm (root, Debian's slurmctld, slurmd and
munge installed) a single-node Slurm from tests/tracer/campaign/slurmcluster.py runs the plan as one
job per cell (`--exclusive`: one at a time) instead of Ray.

    python benchmarks/bench_campaign.py [--runs 4] [--keep DIR] [--slurm]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.tracer.campaign.raycluster import LocalCluster  # noqa: E402
from tests.tracer.campaign.slurmcluster import LocalSlurm  # noqa: E402

PLAN = """\
name = "bench"
frameworks = ["pytorch"]
models = ["mobilenet_v2"]
datasets = ["small"]
repetitions = {runs}

[knobs]
limit = 8
image_size = 64
"""


def campaign(plan: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "tracer", "campaign", str(plan), "--out", str(out), "--no-report", *extra],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"campaign failed:\n{result.stderr[-3000:]}")
    return wall


def run_walls(out: Path) -> list[float]:
    walls = []
    for run_json in sorted(out.glob("*/run.json")):
        r = json.loads(run_json.read_text())
        walls.append((r["wall_end_ns"] - r["wall_start_ns"]) / 1e9)
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--keep", type=Path, help="keep the runs in this folder")
    parser.add_argument("--slurm", action="store_true", help="compare a single-node Slurm, not Ray, with local")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-campaign-"))
    plan = base / "bench.toml"
    base.mkdir(parents=True, exist_ok=True)
    plan.write_text(PLAN.format(runs=args.runs))
    results = {}
    local_out = base / "local"
    results["local"] = (campaign(plan, local_out), run_walls(local_out))
    other = "slurm" if args.slurm else "ray"
    t0 = time.perf_counter()
    if args.slurm:
        slurm = LocalSlurm()
        try:
            slurm.start()
            start_s = time.perf_counter() - t0
            results[other] = (campaign(plan, base / other, "--slurm", env=slurm.env), run_walls(base / other))
        finally:
            slurm.stop()
    else:
        cluster = LocalCluster(workers=0)
        try:
            cluster.start()
            cluster.wait_for_nodes(1)
            start_s = time.perf_counter() - t0
            results[other] = (campaign(plan, base / other, "--ray", cluster.address), run_walls(base / other))
        finally:
            cluster.stop()
    overhead = {}
    for name, (wall, walls) in results.items():
        per_run = (wall - sum(walls)) / len(walls)
        overhead[name] = per_run
        print(
            f"{name:6s}: {len(walls)} runs, campaign {wall:6.1f} s, runs {sum(walls):6.1f} s "
            f"(mean {statistics.fmean(walls):.1f} s), overhead {per_run:.2f} s/run"
        )
    print(f"{other} cluster start (1 node): {start_s:.1f} s (not counted above)")
    print(f"overhead ratio {other}/local: {overhead[other] / overhead['local']:.2f}")


if __name__ == "__main__":
    main()
