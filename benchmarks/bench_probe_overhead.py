"""What profiling your own training costs: examples/pytorch_dataloader.py alone and under
`tracer profile --` (sampler at 10 Hz and the probe), alternating pairs in one run; the median ratio
of their step times (goal: at most 1.01). Also the probe's own cost per step, timed in-process, the
fixed cost of a run (the whole command's wall time under the tracer less alone: the tracer's start-up,
the probe's start in each process, and the finalising after the script ends), and, where TraceML is
installed in its own environment, the same script under `traceml run` as the peer.

    python benchmarks/bench_probe_overhead.py [--pairs 5] [--epochs 4] [--items 2048]
        [--traceml ~/.cache/dl-tracer/traceml-venv/bin/traceml]

Step time is what the script itself prints (its epochs after the first, over their steps), the same
clock with and without the tracer. Results: docs/results/probe-overhead.md.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "pytorch_dataloader.py"
EPOCH_LINE = re.compile(r"^epoch (\d+): [\d.]+ s, ([\d.]+) ms/step", re.M)


def step_ms(stdout: str) -> float:
    """The mean step time of the epochs after the first, as the script printed them."""
    per_epoch = [float(ms) for epoch, ms in EPOCH_LINE.findall(stdout) if int(epoch) > 1]
    if not per_epoch:
        raise RuntimeError(f"no epoch lines after the first in:\n{stdout[-2000:]}")
    return statistics.fmean(per_epoch)


WALL_S: list[float] = []  # each run's wall time, in the order run


def run(cmd: list[str], cwd: Path) -> str:
    """`cmd` in a session of its own, as a script started from its own terminal is and as the tracer starts
    a command: under the kernel's autogroup scheduling (Linux's default) the session decides a process's
    share of a busy machine, so both sides of a pair are scheduled alike."""
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=3600, start_new_session=True)
    WALL_S.append(time.perf_counter() - t)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} ... failed: {done.stderr[-2000:]}")
    return done.stdout


def probe_cost_us(steps: int = 200_000) -> float:
    """The probe's own time per step: iterating a list through a recording Pass against plainly."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "samples").mkdir()
        from tracer.probe.passes import Pass
        from tracer.probe.recorder import Recorder

        recorder = Recorder(tmp)
        items = list(range(steps))
        best_plain = best_probed = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for _item in items:
                pass
            best_plain = min(best_plain, time.perf_counter() - t)
            t = time.perf_counter()
            for _item in Pass(recorder, "marker", False).attach(iter(items)):
                pass
            best_probed = min(best_probed, time.perf_counter() - t)
            recorder.close()
    return 1e6 * (best_probed - best_plain) / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--items", type=int, default=2048)
    p.add_argument("--python", default=str(Path.home() / ".cache/dl-tracer/envs/pytorch/bin/python"))
    p.add_argument("--traceml", default=str(Path.home() / ".cache/dl-tracer/traceml-venv/bin/traceml"))
    args = p.parse_args()
    script = [args.python, str(SCRIPT), "--epochs", str(args.epochs), "--items", str(args.items)]
    traceml = args.traceml if Path(args.traceml).exists() else None
    alone, traced, peer = [], [], []
    alone_wall, traced_wall = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tracer = [sys.executable, "-m", "tracer", "profile", "--out", str(Path(tmp) / "runs"), "--"]
        for i in range(args.pairs):
            order = ["alone", "tracer"] if i % 2 == 0 else ["tracer", "alone"]
            for which in order:
                if which == "alone":
                    alone.append(step_ms(run(script, ROOT)))
                    alone_wall.append(WALL_S[-1])
                else:
                    traced.append(step_ms(run(tracer + script, ROOT)))
                    traced_wall.append(WALL_S[-1])
            if traceml is not None:  # TraceML's own launcher; the script's arguments follow --args
                peer_cmd = [traceml, "run", "--mode", "summary", str(SCRIPT), "--args", *script[2:]]
                peer.append(step_ms(run(peer_cmd, Path(tmp))))
            line = f"pair {i + 1}: alone {alone[-1]:.2f} ms/step, under the tracer {traced[-1]:.2f} ms/step"
            print(line + (f", under TraceML {peer[-1]:.2f} ms/step" if peer else ""), flush=True)
        shutil.rmtree(Path(tmp) / "runs", ignore_errors=True)
    ratios = [t / a for t, a in zip(traced, alone)]
    print(f"median ratio (tracer / alone step time) over {args.pairs} pairs: {statistics.median(ratios):.4f}")
    print(f"spread of the pairs' ratios: {min(ratios):.3f} to {max(ratios):.3f}")
    if peer:
        peer_ratios = [t / a for t, a in zip(peer, alone)]
        print(f"median ratio (TraceML / alone step time): {statistics.median(peer_ratios):.4f}")
    else:
        print(f"TraceML: not run ({args.traceml} not found)")
    print(f"the probe's own cost: {probe_cost_us():.2f} us per step (a recording Pass over a list, best of 5)")
    fixed = [t - a for t, a in zip(traced_wall, alone_wall)]
    print(
        f"fixed cost of a run (wall time under the tracer less alone, median of {args.pairs} pairs): "
        f"{statistics.median(fixed):.2f} s (range {min(fixed):.2f} to {max(fixed):.2f} s; alone "
        f"{statistics.median(alone_wall):.2f} s, under the tracer {statistics.median(traced_wall):.2f} s)"
    )


if __name__ == "__main__":
    main()
