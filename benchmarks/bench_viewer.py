"""How fast the viewer opens big runs and redraws after a pan or zoom, offscreen.

Two cases, each timed the same way:
- samples (default): 4 run folders of 1 million process samples each (Parquet, about 28 h at 10 Hz, with
  8 sampled threads). Goal: open <= 2 s, redraw <= 50 ms.
- `--trace-events N` (e.g. 10000000): the H100 nsys run laid end to end until its trace tables hold N
  events (`tests/analyzers/run_replica.py`; its view stored as the ingest stores it), opened beside the
  4 sampled runs (of `--samples` each). Goal (issue #29): open <= 3 s, redraw <= 16 ms.
Timed: open, from creating the window to every run loaded, every panel built and the window painted once;
redraw, one zoom or pan of the linked x axis plus a full repaint of the time panels and thread lanes, timed once
the background work the open started (the Diagnosis tab's rules) is done. A pan is timed two ways: as a jump
(from a view a whole width away: all of it new) and as a drag step (1 % of the width on from the last view); the
"zoom to ..." kinds are jumps between views of that width, and "zoom in from the whole run to 10 %" a zoom.
Run: `python benchmarks/bench_viewer.py [--samples N] [--runs N] [--trace-events N] [--dir D] [--against REV] [--hog]`.
`--hog` runs one busy-looping Python process while the window is measured (the issues' "one CPU hog" load).
`--against REV` (e.g. `main`) also times the viewer and analyzers packages of that git revision in a child process
on the same runs, before this one, and prints the ratio of each figure (the previous implementation, measured in the
same run).
On screen, the GUI thread's CPU time (`time.thread_time`) of the repaint is given beside its wall time.
Wall and CPU time (`time.process_time`, all threads of this process) are both reported: on a shared, loaded
machine the CPU figure is the steadier one. `--compare-downsampling` times one plot of 4 curves drawn by
pyqtgraph's own clip-to-view and peak downsampling against the viewer's min/max pyramid.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DRAG_STEP = 0.01  # of the view's width: one step of a mouse drag (about 13 pixels of a 1,300-pixel plot)
JUMP, DRAG, ZOOM_IN = "jump", "drag", "zoom in"  # the view a timed redraw comes from (`redraw`)
if ROOT not in [Path(p).resolve() for p in sys.path if p]:  # `--against` puts an older viewer package before it
    sys.path.insert(0, str(ROOT))

from cpu_hog import cpu_hog  # noqa: E402

from tracer.core import schema  # noqa: E402
from tracer.core.frameworks import FRAMEWORKS  # noqa: E402
from tracer.core.records import EnvironmentInfo, ModelFacts, Outcome, RunRecord, RunSpec, RunStatus  # noqa: E402
from tracer.core.runfolder import RunFolder  # noqa: E402

PERIOD_NS = 100_000_000
THREADS = 8
EPOCHS = 10
START_NS = 1_790_000_000_000_000_000


def make_run(out: Path, index: int, samples: int) -> Path:
    """A finished run folder whose samples are a noisy but plausible training run, ingested as
    `tracer profile` ingests every run."""
    rng = np.random.default_rng(index)
    names = list(FRAMEWORKS)
    run_id = f"bench-{index}-{names[index % len(names)]}"
    folder = RunFolder.create(out, run_id)
    t = START_NS + np.arange(samples, dtype=np.int64) * PERIOD_NS
    end = int(t[-1])
    spec = RunSpec(framework=run_id.split("-")[-1], model="resnet50", dataset="big", epochs=EPOCHS)
    env = EnvironmentInfo("bench", "Linux", "bench CPU", 16, 8, 64 * 1024.0, "3.11")
    facts = ModelFacts(25_557_032, 25_557_032)
    record = RunRecord.built_in(run_id, spec, env, Outcome(RunStatus.OK), START_NS, end, model=facts)
    folder.write_record(record)
    bounds = np.linspace(START_NS + 30 * 10**9, end, EPOCHS + 1).astype(np.int64)
    with folder.events_path.open("w") as f:
        for e in range(EPOCHS):
            f.write(json.dumps({"kind": "epoch_start", "t_ns": int(bounds[e]), "epoch": e + 1}) + "\n")
            f.write(
                json.dumps(
                    {
                        "kind": "epoch_end",
                        "t_ns": int(bounds[e + 1]),
                        "epoch": e + 1,
                        "images": 6003,
                        "loss": 1.0 / (e + 1),
                    }
                )
                + "\n"
            )
    cpu = np.clip(60 + 25 * np.sin(np.arange(samples) / 500.0) + rng.normal(0, 8, samples), 0, 100)
    rss = 2000 + np.cumsum(rng.normal(0, 0.5, samples)).clip(-500, 500) + 300 * (np.arange(samples) % 3000 > 2500)
    process = pa.table(
        {
            "t_ns": t,
            schema.CPU_PCT: cpu,
            schema.CPU_CORES: cpu * 0.16,
            schema.RSS_MIB: rss,
            schema.RSS_PCT_RAM: rss / 655.36,
            "threads": (20 + (np.arange(samples) // 100_000) % 5).astype(np.int64),
            "processes": np.ones(samples, dtype=np.int64),
            schema.SYS_CPU_PCT: cpu,
            schema.SYS_RAM_USED_PCT: rss / 655.36,
            schema.SYS_RAM_USED_MIB: rss + 4000,
        }
    )
    pq.write_table(process, folder.sample_parquet_path("process"))
    every = t[::THREADS]
    n = len(every)
    busy = rng.random((THREADS, n)) < np.linspace(0.9, 0.1, THREADS)[:, None]
    cpu_s = np.cumsum(busy * 0.08, axis=1)
    threads = pa.table(
        {
            "t_ns": np.tile(every, THREADS),
            "pid": np.full(n * THREADS, 1000, dtype=np.int64),
            "tid": np.repeat(np.arange(1000, 1000 + THREADS, dtype=np.int64), n),
            "name": np.repeat(np.array([f"worker-{i}" for i in range(THREADS)], dtype=object), n),
            schema.USER_S: cpu_s.ravel(),
            schema.SYSTEM_S: np.zeros(n * THREADS),
        }
    )
    pq.write_table(threads, folder.sample_parquet_path("threads"))
    from analyzers.ingest.pipeline import ingest_run

    ingest_run(folder)  # as `tracer profile` leaves every run: its thread timeline and, this big, its view
    return folder.path


def long_trace(root: Path, events: int) -> tuple[Path, int]:
    """The replicated H100 run (kept under `root` for reruns) with its view stored, as the ingest leaves it."""
    from analyzers.timeline import view_store
    from tests.analyzers.run_replica import replicate_run, trace_events

    out = root / f"trace-{events}"
    found = sorted(out.glob("*-x*"))
    t0 = time.perf_counter()
    path = found[0] if found else replicate_run(out, events)
    made = time.perf_counter()
    if not found:
        print(f"generated a traced run of {trace_events(path):,} events in {made - t0:.1f} s")
    if not (path / view_store.VIEW_DIR).is_dir():
        view_store.store_if_big(RunFolder(path))
        print(f"stored its view (as the ingest does) in {time.perf_counter() - made:.1f} s")
    return path, trace_events(path)


def untraced_copy(path: Path, root: Path) -> Path:
    """The run folder without its trace tables, thread timeline and view: what an untraced run of it holds."""
    import shutil

    from analyzers.timeline import view_store
    from analyzers.trace import tables as t

    dst = root / "untraced" / path.name
    if not dst.exists():
        shutil.copytree(path, dst, ignore=shutil.ignore_patterns("*.parquet", t.TRACE_META, view_store.VIEW_DIR))
        for table in path.glob("samples/*.parquet"):  # the samples are kept (the pattern above dropped them)
            shutil.copy(table, dst / "samples" / table.name)
    return dst


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def compare_downsampling(app: object, samples: int) -> None:
    """One plot, 4 curves of `samples` points: pyqtgraph's clipToView + auto peak downsampling against
    `EnvelopeCurve`; CPU time of building plus first paint, and the median of 10 redraws per kind."""
    import pyqtgraph as pg  # noqa: TID251 - a benchmark of the viewer

    from viewer.panels.curve import EnvelopeCurve  # noqa: TID251
    from viewer.pyramid import Envelope  # noqa: TID251

    rng = np.random.default_rng(0)
    x = np.arange(samples) * 0.1
    ys = [np.cumsum(rng.normal(size=samples)) for _ in range(4)]
    span = float(x[-1])
    kinds = {
        "pan at full view": [(span * 0.01 * (i % 3), span * (1 + 0.01 * (i % 3))) for i in range(10)],
        "zoom to 10 %": [(span * (0.1 + 0.02 * i), span * (0.2 + 0.02 * i)) for i in range(10)],
        "zoom to 1 minute": [(span / 2 + 60 * i, span / 2 + 60 * (i + 1)) for i in range(10)],
    }
    pg.setConfigOptions(antialias=False)
    for way in ("pyqtgraph", "pyramid"):
        widget = pg.PlotWidget()
        widget.resize(1400, 300)
        widget.show()
        cpu = time.process_time()
        if way == "pyqtgraph":
            widget.getPlotItem().setDownsampling(auto=True, mode="peak")
            widget.getPlotItem().setClipToView(True)
        for y in ys:
            widget.addItem(
                pg.PlotDataItem(x, y, skipFiniteCheck=True)
                if way == "pyqtgraph"
                else EnvelopeCurve(Envelope(x, y), 0.0)
            )
        widget.grab()
        build = time.process_time() - cpu
        medians = []
        for kind, ranges in kinds.items():
            times = []
            for a, b in ranges:
                app.processEvents()  # type: ignore[attr-defined]
                cpu = time.process_time()
                widget.setXRange(a, b, padding=0)
                widget.grab()
                times.append(time.process_time() - cpu)
            medians.append(f"{kind} {median_ms(times):.1f} ms")
        print(f"{way:>9}: build + first paint {build * 1000:.0f} ms CPU; redraw CPU (median): " + ", ".join(medians))
        widget.close()


def measure(
    app: object,
    out: Path,
    paths: list[Path],
    what: str,
    open_goal_s: float,
    redraw_goal_ms: float,
    args: object,
    shot: Path | None = None,
) -> dict[str, float]:
    """Opens `paths` in a main window, then times redraws after zooms and pans; prints the figures and
    returns them by name (ms; the open in s)."""
    from viewer.window import MainWindow  # noqa: TID251 - a benchmark of the viewer

    t0, cpu0, gui0 = time.perf_counter(), time.process_time(), time.thread_time()
    window = MainWindow(out)
    window.resize(1600, 1100)
    window.show()
    window.add_runs(paths)
    while window.loader.pending or len(window.runs) < len(paths):
        app.processEvents()  # type: ignore[attr-defined]
        time.sleep(0.001)
    t_loaded = time.perf_counter()
    app.processEvents()  # type: ignore[attr-defined]
    window.grab()
    t_open = time.perf_counter()
    print(f"opened: {what}")
    print(
        f"open: {t_open - t0:.2f} s wall, {time.process_time() - cpu0:.2f} s CPU over all threads, "
        f"{time.thread_time() - gui0:.2f} s of it on the GUI thread  "
        f"(until the last run loaded and panels built {t_loaded - t0:.2f} s, first paint "
        f"{t_open - t_loaded:.2f} s)  goal <= {open_goal_s:g} s"
    )
    if shot is not None:
        window.grab().save(str(shot))
        threads_shot = shot.with_name(f"{shot.stem}-lanes{shot.suffix}")
        window.threads.grab().save(str(threads_shot))
        print(f"screenshots: {shot}, {threads_shot}")
    # the Diagnosis tab's rules run in Qt's global pool (about 10 s on the 10 M-event trace) and hold the
    # interpreter's lock in turns with the GUI thread: the redraws are timed once they are done
    from PySide6 import QtCore

    waited = time.perf_counter()
    while window.after_paint.pending:  # started after the first paint (viewer.after_paint)
        app.processEvents()  # type: ignore[attr-defined]
        time.sleep(0.001)
    QtCore.QThreadPool.globalInstance().waitForDone()
    print(f"background work after the open (the diagnosis): {time.perf_counter() - waited:.1f} s more")
    master = window.timeline.master
    assert master is not None
    (lo, hi), _ = master.viewRange()
    span = hi - lo
    cpu_times: list[float] = []
    lane_times: list[float] = []
    screen_times: list[float] = []
    screen_cpu: list[float] = []
    figures = {"open wall s": t_open - t0}

    def redraw(x0: float, x1: float, came_from: str) -> float:
        """One range change and one synchronous paint of the whole linked panels, scrolled-out parts too
        (what the figures on this page have always been); then the same range change painted on screen
        (the visible part of the window, what a user waits for); then the thread lanes' own redraw for that
        range again, alone (raster from the pyramid, images). `came_from` the view before it: a jump comes
        from a view a whole width away, so all of it is new; a drag step from the view `DRAG_STEP` of a width
        before it; a zoom in from the whole run."""
        app.processEvents()  # type: ignore[attr-defined]
        width = x1 - x0  # elsewhere first, so the range below is a change
        before = {JUMP: (x1, x1 + width), DRAG: (x0 - width * DRAG_STEP, x1 - width * DRAG_STEP), ZOOM_IN: (lo, hi)}
        master.setXRange(*before[came_from], padding=0)
        app.processEvents()  # type: ignore[attr-defined]
        shown, shown_cpu = time.perf_counter(), time.thread_time()
        master.setXRange(x0, x1, padding=0)
        app.processEvents()  # type: ignore[attr-defined]
        screen_times.append(time.perf_counter() - shown)
        screen_cpu.append(time.thread_time() - shown_cpu)
        master.setXRange(*before[came_from], padding=0)
        app.processEvents()  # type: ignore[attr-defined]
        start, cpu = time.perf_counter(), time.process_time()
        master.setXRange(x0, x1, padding=0)
        window.timeline.grab()
        window.threads.grab()
        cpu_times.append(time.process_time() - cpu)
        wall = time.perf_counter() - start
        lanes = time.perf_counter()
        window.threads._redraw()
        lane_times.append(time.perf_counter() - lanes)
        return wall

    redraw(lo, hi, JUMP)
    repeat = getattr(args, "repeat", 15)
    tenth = [(lo + span * (0.1 + 0.02 * i), lo + span * (0.2 + 0.02 * i)) for i in range(repeat)]
    full = [(lo + span * 0.01 * (i % 3), hi + span * 0.01 * (i % 3)) for i in range(repeat)]
    minute = [(lo + span * 0.5 + 60 * i, lo + span * 0.5 + 60 * (i + 1)) for i in range(repeat)]
    kinds = {  # name: (ranges, the view before each)
        "zoom to 10 % of the run": (tenth, JUMP),
        "pan at full view": (full, JUMP),
        "zoom to 1 minute": (minute, JUMP),
        "drag step at full view": (full, DRAG),
        "drag step at 10 %": (tenth, DRAG),
        "zoom in from the whole run to 10 %": (tenth, ZOOM_IN),
    }
    for kind, (ranges, came_from) in kinds.items():
        for figures_of_kind in (cpu_times, lane_times, screen_times, screen_cpu):
            figures_of_kind.clear()
        times = [redraw(a, b, came_from) for a, b in ranges]
        print(
            f"redraw after {kind}: on screen {median_ms(screen_times):.1f} ms wall, {median_ms(screen_cpu):.1f} ms "
            f"CPU on the GUI thread (least {min(screen_cpu) * 1000:.1f}) (goal <= {redraw_goal_ms:g} ms); "
            f"both panels whole (grab) median {median_ms(times):.1f} ms wall, {median_ms(cpu_times):.1f} ms CPU, "
            f"max {max(times) * 1000:.1f} ms wall; thread and GPU lanes alone {median_ms(lane_times):.1f} ms"
        )
        figures[f"{kind}: on screen, wall"] = median_ms(screen_times)
        figures[f"{kind}: on screen, GUI thread CPU"] = median_ms(screen_cpu)
        figures[f"{kind}: both panels whole, wall"] = median_ms(times)
        figures[f"{kind}: lanes alone, wall"] = median_ms(lane_times)
    gpu = window.runs[0].lanes.gpu
    if shot is not None and gpu is not None:  # the traced run, zoomed in
        middle = (int(gpu.start_ns[len(gpu.start_ns) // 2]) - window.runs[0].anchor_ns(window.align)) / 1e9
        window.threads.plot.setXRange(middle - 0.05, middle + 0.05, padding=0)  # 100 ms: kernels, calls, steps
        app.processEvents()  # type: ignore[attr-defined]
        zoom_shot = shot.with_name(f"{shot.stem}-lanes-100ms{shot.suffix}")
        window.threads.grab().save(str(zoom_shot))
        print(f"screenshot zoomed to 100 ms: {zoom_shot}")
    window.close()
    return figures


def _without(argv: list[str], *options: str) -> list[str]:
    """`argv` without these options and their values."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in options:
            skip = True
        elif not a.startswith(tuple(f"{o}=" for o in options)):
            out.append(a)
    return out


def against(rev: str, argv: list[str], root: Path) -> dict[str, float]:
    """The same benchmark with the `viewer` package of git revision `rev`, in a child process: its figures."""
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    base = root / f"viewer-{rev.replace('/', '-')}"
    base.mkdir(parents=True, exist_ok=True)
    # the viewer and the analyzers it draws from (the stored view's reader among them) as they were at `rev`
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", rev, "viewer", "analyzers"], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
    out = root / f"figures-{rev.replace('/', '-')}.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(base), str(repo)]), "BENCH_VIEWER_FIGURES": str(out)}
    print(f"--- the viewer of {rev} (child process) ---", flush=True)
    subprocess.run([sys.executable, __file__, *argv], env=env, check=True)
    print("--- this tree's viewer ---", flush=True)
    return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=15, help="redraws timed per kind (median reported)")
    parser.add_argument("--dir", type=Path, help="keep the generated runs here and reuse them on the next call")
    parser.add_argument(
        "--trace-events", type=int, default=0, help="also open a traced run of this many trace events (e.g. 10000000)"
    )
    parser.add_argument("--screenshot", type=Path, help="save the window, as opened, to this PNG")
    parser.add_argument("--hog", action="store_true", help="one CPU-bound Python process while the window is measured")
    parser.add_argument("--against", metavar="REV", help="also time the viewer of this git revision (e.g. main)")
    parser.add_argument(
        "--compare-downsampling",
        action="store_true",
        help="only time pyqtgraph's downsampling against the viewer's pyramid on one plot",
    )
    args = parser.parse_args()

    from PySide6 import QtWidgets  # noqa: TID251 - a benchmark of the viewer

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    if args.compare_downsampling:
        compare_downsampling(app, args.samples)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-viewer-") as tmp:
        previous: dict[str, float] = {}
        if args.against:
            argv = _without(sys.argv[1:], "--against", "--screenshot")
            if args.dir is None:  # the child makes the runs; both must time the same ones
                argv += ["--dir", str(Path(tmp) / "runs")]
                args.dir = Path(tmp) / "runs"
            previous = against(args.against, argv, Path(tmp))
        out = args.dir / f"{args.runs}x{args.samples}" if args.dir else Path(tmp)
        paths = sorted(out.glob("bench-*")) if out.is_dir() else []
        if len(paths) != args.runs:
            t0 = time.perf_counter()
            out.mkdir(parents=True, exist_ok=True)
            paths = [make_run(out, i, args.samples) for i in range(args.runs)]
            print(f"generated {args.runs} runs x {args.samples:,} samples in {time.perf_counter() - t0:.1f} s")
        events = 0
        if args.trace_events:
            traced, events = long_trace(args.dir or Path(tmp), args.trace_events)
            paths = [traced, *paths]

        peer = untraced_copy(paths[0], Path(tmp)) if events else None
        with cpu_hog(args.hog) as hog:
            print(f"load: {'one CPU hog running' if hog else 'no hog'}")
            if peer is not None:
                what = f"{args.runs} sampled runs beside a traced run of {events:,} events"
                figures = measure(app, out, paths, what, 3, 16, args, args.screenshot)
                print()
                what = "the same runs, the traced one without its trace tables (the peer: same panels, same samples)"
                measure(app, out, [peer, *paths[1:]], what, 3, 16, args)
            else:
                what = f"{args.runs} runs x {args.samples:,} samples"
                figures = measure(app, out, paths, what, 2, 50, args, args.screenshot)
    if os.environ.get("BENCH_VIEWER_FIGURES"):
        Path(os.environ["BENCH_VIEWER_FIGURES"]).write_text(json.dumps(figures))
    if previous:
        print(f"\nthis tree against {args.against} (its figure / this one; > 1: this tree is faster):")
        for name, value in figures.items():
            if name in previous and value > 0:
                print(f"  {name}: {previous[name]:.1f} -> {value:.1f} ({previous[name] / value:.2f}x)")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (shared machines make this noisy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
