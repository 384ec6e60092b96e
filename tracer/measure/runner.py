"""Runs one training in a child process under the sampler and leaves a complete run folder,
however the training ends (finished, raised, crashed, killed, timed out, Ctrl-C)."""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
from rich.console import Console
from rich.markup import escape

import tracer
from tracer.core import window
from tracer.core.cases import make_run_id
from tracer.core.divergence import diverged_outcome, divergence
from tracer.core.errors import UserError
from tracer.core.options import worker_config
from tracer.core.paths import cache_root
from tracer.core.records import (
    DatasetInfo,
    EnvironmentInfo,
    MeasurementCost,
    ModelFacts,
    Outcome,
    RankInfo,
    RunRecord,
    RunSpec,
    RunStatus,
)
from tracer.core.runfolder import RunFolder
from tracer.core.schema import DATA_FILES, DATA_MEMORY, EXIT_DIVERGED, KIND, STEPS_TABLE, TRACER_PID_ENV, Event
from tracer.core.signals import TERMINAL_SIGNALS
from tracer.measure import rank_launch, sysinfo
from tracer.measure.dataset import check_memory_fits
from tracer.measure.environments import EnvStatus
from tracer.measure.nvml import Nvml
from tracer.measure.progress import ProgressView
from tracer.measure.rapl import POWERCAP_ROOT, RaplReader
from tracer.measure.sampler import Sampler
from tracer.measure.stall import StallWatch, tree_pids
from tracer.measure.tegrastats import TegrastatsSampler, find_tegrastats
from tracer.measure.tracing.base import TraceBackend
from tracer.measure.tracing.pyspy import PySpyRecorder, find_pyspy

POLL_S = 0.2
PUMP_GRACE_S = 2.0  # how long the command's output may take to drain once it has ended
TERMINATE_GRACE_S = 5.0
STDERR_TAIL_LINES = 25
WORKER_TMP_PREFIX = "dl-tracer-worker-"
TMPDIR_MAX_CHARS = 40
RESERVE_FILE = ".reserve"  # in raw/, removed before the final run.json is written
RESERVE_BYTES = 256 * 1024
STALL_STACKS = "raw/stalled-stacks.txt"
STACKS_TIMEOUT_S = 30.0
CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}


@dataclass(frozen=True)
class Launch:
    """What the runner needs besides the spec: the interpreter, the dataset folder, where to write."""

    spec: RunSpec
    python: EnvStatus
    dataset_dir: Path
    out_dir: Path
    backend: TraceBackend  # built and given its cheap checks once, by whoever launches


def worker_pythonpath() -> Path:
    """A folder holding only `tracer/worker`, so the framework's interpreter sees none of the
    tracer's own packages (a NumPy from here would shadow MXNet's pinned one)."""
    source = Path(tracer.__file__).resolve().parent
    stage = cache_root() / "worker-path" / hashlib.sha256(str(source).encode()).hexdigest()[:16]
    pkg = stage / "tracer"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text('"""Worker-side stub of the tracer package."""\n')
    link = pkg / "worker"
    if not (link.is_symlink() and link.resolve() == source / "worker"):
        tmp = pkg / f"worker.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(source / "worker", target_is_directory=True)
        os.replace(tmp, link)
    return stage


@dataclass(frozen=True)
class Child:
    """The process a run measures, as `Runner.supervise` starts it."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    #: (stdout file, stderr file): the child's output reaches our stdout and stderr as it comes and is
    #: kept in these files; None: both go into raw/worker.log only (the built-in worker).
    tee: tuple[Path, Path] | None = None
    #: What Ctrl-C sends first: the worker takes SIGTERM; a user's script gets the SIGINT it would have.
    interrupt_signal: int = signal.SIGTERM
    #: Under a wrapping backend (nsys): whether the measured process writes worker.pid (the sampler waits for it).
    pid_file: bool = True
    progress: Callable[[], ProgressView] | None = None
    progress_files: tuple[Path, ...] = ()  # more files whose growth is progress for the stall watch
    #: Whether processes that left the child's group (torchrun starts each rank in a session of its own)
    #: are ended too: this process becomes their subreaper, so they are found as its descendants.
    sweep: bool = False
    #: An environment entry (NAME=value) only the child's processes hold: the lifeguard ends those that
    #: left its group too, should this process die first.
    mark: str = ""
    #: `--nproc`: this many ranks of the built-in worker in one process group, rank r's folder replacing the
    #: last argument (tracer.measure.rank_launch); a rank that fails ends them all.
    ranks: int = 1


@dataclass(frozen=True)
class Ended:
    """How the supervised child ended: its exit status, what ended it (None: itself), what was sampled."""

    returncode: int
    ended_by: str | None
    sampling: Any
    sampler_error: str | None
    failed_rank: int | None = None  # the rank whose failure ended a run of several ranks
    rank_returncode: int | None = None


class _Tee(threading.Thread):
    """Copies a child's pipe to one of our file descriptors and to a file, chunk by chunk, unchanged."""

    CHUNK = 65536

    def __init__(self, pipe: Any, fd: int, path: Path) -> None:
        super().__init__(daemon=True)
        self.pipe, self.fd, self.path = pipe, fd, path
        self.start()

    def run(self) -> None:
        to_terminal = True
        with self.path.open("wb") as kept:
            while True:
                chunk = os.read(self.pipe.fileno(), self.CHUNK)
                if not chunk:
                    break
                kept.write(chunk)
                kept.flush()
                while to_terminal and chunk:
                    try:
                        written = os.write(self.fd, chunk)
                    except BlockingIOError:
                        time.sleep(0.01)
                        continue
                    except OSError:  # our terminal went away: the file still gets everything
                        to_terminal = False
                        break
                    chunk = chunk[written:]
        self.pipe.close()


class _Signals:
    """Ctrl-C (SIGINT) and `kill <tracer>` (SIGTERM), from before the run folder exists until it is
    final: the first asks the training to end (the run is `interrupted`, recorded like any other end),
    a second hurries the ending (the worker gets no grace), and none abandons it: no handler raises,
    so no signal can cut the finalising (run.json, samples to Parquet, the worker's temp folder) short.
    Twice 50 ms apart used to leave the run `running`, its samples CSV and its temp folder behind."""

    HANDLED = TERMINAL_SIGNALS

    def __init__(self) -> None:
        self.count = 0
        self.last: int = signal.SIGINT
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        self.count += 1
        self.last = signum

    @property
    def hurry(self) -> bool:
        return self.count > 1

    def __enter__(self) -> _Signals:
        # Arrow's own handlers would cancel a CSV read on SIGTERM and then let the signal kill us
        # (samples left CSV, "ArrowCancelled: received signal 15"): ours count, Arrow's stand aside.
        pa.enable_signal_handlers(False)
        for sig in self.HANDLED:
            if signal.getsignal(sig) == signal.SIG_IGN:  # ignored at start (a background job): stays so
                continue
            try:
                self._previous[sig] = signal.signal(sig, self._handler)
            except ValueError:  # not the main thread: whoever runs us there handles signals
                break
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        pa.enable_signal_handlers(True)


# A powercap tree other than the kernel's (tests, containers with it mounted elsewhere).
POWERCAP_ROOT_ENV = "TRACER_POWERCAP_ROOT"


class Supervisor:
    """What every run shares, whatever it runs: the machine's measuring sources, the signals, the one
    child-process path (`supervise`) and the finishing of the folder. `Runner` runs the built-in worker
    with it, `tracer.measure.command.CommandRunner` a user's command."""

    def __init__(self, backend: TraceBackend, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.backend = backend
        self._pyspy_files: list[str] = []
        self.cost: MeasurementCost | None = None
        self._rapl: RaplReader | None = None
        self._tegrastats: str | None = None
        self.signals = _Signals()
        self._ranks: tuple[RankInfo, ...] = ()

    @property
    def signalled(self) -> bool:
        """Whether SIGINT or SIGTERM came during the run (its folder is final all the same)."""
        return self.signals.count > 0

    def open_machine(self, python: str, python_version: str) -> tuple[Nvml | None, EnvironmentInfo]:
        """NVML, RAPL and tegrastats opened, and the machine's facts with what will measure energy."""
        nvml, nvml_status = Nvml.open()
        self._rapl, rapl_status = RaplReader.open(Path(os.environ.get(POWERCAP_ROOT_ENV, POWERCAP_ROOT)))
        self._tegrastats = find_tegrastats(nvml is not None)
        env = dataclasses.replace(
            sysinfo.collect(nvml, nvml_status), worker_python=python, worker_python_version=python_version
        )
        return nvml, with_energy_sources(env, self._rapl, rapl_status, self._tegrastats)

    def start_folder(self, out_dir: Path, record: RunRecord, config: dict[str, Any] | None) -> RunFolder:
        """The run folder with its first run.json (and the worker's configuration), and the space held
        back for the final run.json; a folder that cannot be written is a UserError and is removed."""
        folder = RunFolder.create(out_dir, record.run_id)
        try:  # run.json and the space for its final version come before any stream
            folder.write_record(record)
            if config is not None:
                folder.worker_config_path.write_text(json.dumps(config, indent=2, allow_nan=False) + "\n")
            _reserve(folder)
        except OSError as e:
            shutil.rmtree(folder.path, ignore_errors=True)
            raise UserError(f"cannot start a run in {out_dir}: {e.strerror or e} (free some space)") from None
        return folder

    def finish_folder(
        self,
        folder: RunFolder,
        outcome: Outcome,
        complete: Callable[[Outcome, list[str]], RunRecord],
        nvml: Nvml | None,
    ) -> RunRecord:
        """The final run.json (from `complete(outcome, trace files)`) and the samples as Parquet."""
        full = _disk_full(folder, outcome)
        (folder.raw_dir / RESERVE_FILE).unlink(missing_ok=True)  # its space is for the final run.json
        if full:
            outcome = dataclasses.replace(outcome, cause=causes(full, outcome.cause))
            self.console.print(f"[red]{full}[/red]")
            trace_files = self._pyspy_files
        else:
            trace_files = self._finish_traces(folder) + self._pyspy_files
        record = dataclasses.replace(complete(outcome, trace_files), measurement_cost=self.cost)
        if nvml is not None and nvml.unavailable:  # each NVML reading the run did not get, and why
            env = dataclasses.replace(record.environment, nvml_unavailable=dict(nvml.unavailable))
            record = dataclasses.replace(record, environment=env)
        folder.write_record(record)
        problems = folder.finalise_samples()
        if problems:
            self.console.print(f"[yellow]samples:[/yellow] {'; '.join(problems)}")
        return record

    def _with_sampler_error(self, outcome: Outcome, ended: Ended) -> Outcome:
        if ended.sampler_error:
            stopped = f"sampler stopped early: {ended.sampler_error}"
            outcome = dataclasses.replace(outcome, cause=causes(outcome.cause, stopped))
        return outcome

    def supervise(
        self, folder: RunFolder, child: Child, spec: RunSpec, nvml: Nvml | None, pyspy: Path | None = None
    ) -> Ended:
        """Starts `child` (under the trace backend) and measures it until it ends or is ended: the
        sampler over its whole process tree, NVML, energy, py-spy, the timeout, the stall watch and
        Ctrl-C; no process of its group outlives this call. The one child-process path of the built-in
        worker and a user's command."""
        cmd = self.backend.command(child.argv, folder, spec)
        env = {**child.env, **self.backend.environment(folder, spec)}
        worker_tmp = _worker_tmp()
        env["TMPDIR"] = str(worker_tmp)  # PyTorch's /tmp/pymp-* land here and go with it
        started = time.monotonic()
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        if child.sweep:
            become_subreaper()
        known = {p.pid for p in psutil.Process().children(recursive=True)} if child.sweep else set()
        world = child.ranks
        procs: list[subprocess.Popen[bytes]] = []
        if world > 1:  # one group: ending it, the lifeguard and the lifeline reach every rank
            procs = rank_launch.start(folder, world, lambda where: [*cmd[:-1], str(where.path)], env)
            proc = procs[0]
            pumps: list[_Tee] = []
        elif child.tee is None:
            with folder.worker_log.open("wb") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            pumps = []
        else:  # the command's own output: to our terminal as it comes, byte for byte, and into raw/
            proc = subprocess.Popen(
                cmd,
                stdin=None,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=child.cwd,
                start_new_session=True,
            )
            assert proc.stdout is not None and proc.stderr is not None
            pumps = [_Tee(proc.stdout, 1, child.tee[0]), _Tee(proc.stderr, 2, child.tee[1])]
        guard = _start_lifeguard(proc.pid, child.mark)

        def target_pid() -> int | None:
            pid = _read_pid(folder) if self.backend.wraps_process else None
            return pid if pid is not None else (None if self.backend.wraps_process and child.pid_file else proc.pid)

        sampler = Sampler(folder, target_pid, spec.sample_hz, nvml, self._rapl)
        sampler.start()
        procs = procs or [proc]
        rank_samplers = [  # each rank's process tree apart, into its own folder; the machine's sources once
            Sampler(where, functools.partial(rank_launch.read_pid, where), spec.sample_hz, None)
            for where in rank_launch.folders(folder, world)[1:]
        ]
        for s in rank_samplers:
            s.start()
        failed_rank: int | None = None
        tegra = TegrastatsSampler(folder, self._tegrastats, spec.sample_hz) if self._tegrastats else None
        if tegra is not None:
            tegra.start()
        windowed = window.of_record(spec) is not None
        spy = PySpyRecorder(folder, pyspy, windowed) if pyspy is not None else None
        view = child.progress() if child.progress is not None else None
        stall = StallWatch(
            [folder.events_path, folder.sample_stream_path(STEPS_TABLE), *child.progress_files], spec.stall_s
        )
        ended_by: str | None = None

        def hurry() -> bool:
            return self.signals.hurry

        try:
            while rank_launch.running(procs):
                if view is not None:
                    view.poll()
                if guard is not None and guard.poll() is not None:  # the guard was killed: a new one
                    guard = _start_lifeguard(proc.pid, child.mark)
                failed_rank = rank_launch.first_failed(procs) if world > 1 else None
                if failed_rank is not None:  # the others would wait for it in their next collective
                    ended_by = "rank-failed"
                    _terminate(proc, hurry)
                    break
                if spy is not None:
                    spy.poll(target_pid())
                if self.signals.count:
                    ended_by = "interrupted"
                    _terminate(proc, hurry, child.interrupt_signal)
                    break
                if spec.timeout_s is not None and time.monotonic() - started > spec.timeout_s:
                    ended_by = "timeout"
                    _terminate(proc, hurry)
                    break
                if stall.check(proc.pid):  # the whole launched tree: under nsys, nsys writing its report is progress
                    ended_by = "stalled"
                    self.console.print(f"[red]no progress for {spec.stall_s:g} s:[/red] ending the run as stalled")
                    dump_stacks(folder, proc.pid)
                    _terminate(proc, hurry)
                    break
                time.sleep(POLL_S)
        except KeyboardInterrupt:  # raised by code of ours, not by a signal (the handlers only count)
            ended_by = "interrupted"
            _terminate(proc, hurry, child.interrupt_signal)
        finally:
            for p in procs:
                p.wait()
            _end_group(proc.pid)  # loader processes outlive a worker that died by itself
            for pump in pumps:  # a process that left the group may still hold the pipes: swept below
                pump.join(timeout=PUMP_GRACE_S)
            _stop_lifeguard(guard)
            shutil.rmtree(worker_tmp, ignore_errors=True)
            if spy is not None:
                self._pyspy_files = spy.stop()
                if spy.error:
                    self.console.print(f"[yellow]py-spy:[/yellow] {spy.error}")
            sampling = sampler.stop()
            for s in rank_samplers:
                s.stop()
            if world > 1:
                rank_launch.merge(folder, world)
                pids = [rank_launch.read_pid(where) for where in rank_launch.folders(folder, world)]
                self._ranks = rank_launch.rank_infos(spec, pids, os.uname().nodename)
            if tegra is not None:
                tegra.stop()
            if view is not None:
                view.close()
            if child.sweep:
                swept = sweep_descendants(known)
                if swept:
                    self.console.print(f"ended {len(swept)} process(es) the command left behind: {swept}")
            for pump in pumps:
                pump.join()
        if ended_by is None and self.signals.count:
            # the signal reached the worker's group too (Slurm's scancel signals every process of the job,
            # a terminal's Ctrl-C the foreground group): the worker may be gone before the loop saw the count
            ended_by = "interrupted"
        self.cost = measurement_cost(sampling, children_before, time.monotonic() - started)
        if tegra is not None and (tegra.error or tegra.warnings):
            self.console.print(f"[yellow]tegrastats:[/yellow] {escape(tegra.error or tegra.warnings[0])}")
        failed_code = procs[failed_rank].returncode if failed_rank is not None else None
        return Ended(proc.returncode, ended_by, sampling, sampler.error, failed_rank, failed_code)

    def _finish_traces(self, folder: RunFolder) -> list[str]:
        try:
            return self.backend.finish(folder)
        except Exception as e:  # noqa: BLE001 - a trace that cannot be ingested must not lose the run
            self.console.print(f"[yellow]trace not ingested:[/yellow] {type(e).__name__}: {e}")
            return []


class Runner(Supervisor):
    def __init__(self, launch: Launch, console: Console | None = None) -> None:
        super().__init__(launch.backend, console)
        self.launch = launch

    def run(self) -> tuple[RunFolder, RunRecord]:
        with self.signals:
            return self._run()

    def _run(self) -> tuple[RunFolder, RunRecord]:
        spec = self._with_window(self.launch.spec)
        self.backend.check(spec, self.launch.python.python)
        if spec.data == DATA_MEMORY:  # before any folder: a set that cannot fit is refused, not a failed run
            check_memory_fits(self.launch.dataset_dir, spec.limit, spec.image_size)
        if spec.nproc > 1 and spec.data != DATA_FILES:
            raise UserError(f"--nproc trains from --data {DATA_FILES} only: each rank reads its shard of the images")
        if spec.nproc > 1 and spec.trace != "none":
            raise UserError(
                "--nproc with --trace is not built: trace the ranks with the PyTorch profiler in your own script "
                "and `tracer import` their traces together (a folder or a .tar of them)"
            )
        pyspy = find_pyspy() if spec.pyspy else None
        nvml, env = self.open_machine(self.launch.python.python, self.launch.python.python_version)
        if self.signals.count:  # before any folder: nothing to record
            raise KeyboardInterrupt
        record = RunRecord(
            run_id=make_run_id(spec),
            spec=spec,
            environment=env,
            outcome=Outcome(RunStatus.RUNNING, "training"),
            wall_start_ns=time.time_ns(),
            tracer_pid=os.getpid(),
        )
        config = worker_config(spec, dataset_dir=str(self.launch.dataset_dir))
        folder = self.start_folder(self.launch.out_dir, record, config)
        self.console.print(f"run {folder.run_id}: {spec.framework} {spec.model} on {spec.dataset}, {spec.device}")
        try:
            outcome, sampling, events = self._train(folder, nvml, pyspy)
        finally:
            if nvml is not None:
                nvml.close()

        def complete(outcome: Outcome, trace_files: list[str]) -> RunRecord:
            done = _completed(record, events, outcome, sampling, trace_files, self.launch.dataset_dir)
            return dataclasses.replace(done, ranks=self._ranks)

        return folder, self.finish_folder(folder, outcome, complete, nvml)

    def _with_window(self, spec: RunSpec) -> RunSpec:
        """The spec with its trace window resolved (what run.json records); the default is said once."""
        text, by_default = window.resolve(spec)
        if text != spec.trace_window:
            spec = dataclasses.replace(spec, trace_window=text)
            self.launch = dataclasses.replace(self.launch, spec=spec)
        if by_default and text is not None:
            self.console.print(window.default_note(text, spec.epochs))
        return spec

    def _train(
        self, folder: RunFolder, nvml: Nvml | None, pyspy: Path | None = None
    ) -> tuple[Outcome, Any, list[dict[str, Any]]]:
        spec = self.launch.spec
        cmd = [self.launch.python.python, "-m", "tracer.worker", str(folder.path)]
        env = dict(os.environ)
        env["PYTHONPATH"] = str(worker_pythonpath())
        env["PYTHONUNBUFFERED"] = "1"
        env[TRACER_PID_ENV] = str(os.getpid())  # the worker dies with this process (tracer/worker/lifeline.py)
        child = Child(
            cmd, env, progress=lambda: ProgressView(self.console, folder.events_path, spec.epochs), ranks=spec.nproc
        )
        ended = self.supervise(folder, child, spec, nvml, pyspy)
        events = folder.events()  # read once, now that the worker has ended
        returncode = self.backend.worker_returncode(ended.returncode, events)
        outcome = classify(returncode, ended.ended_by, events, folder, spec)
        if ended.failed_rank is not None:
            outcome = _rank_failed(ended.failed_rank, ended.rank_returncode or 0, folder, spec)
        return self._with_sampler_error(outcome, ended), ended.sampling, events


def measurement_cost(sampling: Any, before: resource.struct_rusage, wall_s: float) -> MeasurementCost:
    """The sampler's CPU clock against the CPU the kernel charged the reaped worker tree since `before`."""
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    training = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    sampler = float(sampling.sampler_cpu_s or 0.0)
    return MeasurementCost(
        sampler_cpu_s=round(sampler, 6),
        training_cpu_s=round(training, 6),
        wall_s=round(wall_s, 6),
        sampler_pct_of_training_cpu=round(100 * sampler / training, 4) if training > 0 else None,
        sampler_pct_of_wall=round(100 * sampler / wall_s, 4) if wall_s > 0 else None,
    )


def with_energy_sources(
    env: EnvironmentInfo, rapl: RaplReader | None, rapl_status: str, tegrastats: str | None
) -> EnvironmentInfo:
    """What will measure energy in this run, and why each kind of source that will not is absent."""
    sources = [f"NVML GPU {g.index}" for g in env.gpus]
    missing = [] if sources else [f"NVML: {env.nvml}"]
    if rapl is not None:
        sources += rapl.sources()
    else:
        missing.append(rapl_status)
    if tegrastats:
        sources.append(f"tegrastats board input rail ({tegrastats})")
    elif not env.gpus:
        missing.append("tegrastats: not on PATH nor in /usr/bin (not a Jetson)")
    return dataclasses.replace(env, energy_sources=tuple(sources), energy_unavailable=tuple(missing))


def _read_pid(folder: RunFolder) -> int | None:
    try:
        return int(folder.worker_pid_path.read_text().strip())
    except (OSError, ValueError):
        return None


def _terminate(
    proc: subprocess.Popen[bytes], hurry: Callable[[], bool] = lambda: False, first: int = signal.SIGTERM
) -> None:
    """`first` (SIGTERM) to the worker's whole process group (DataLoader workers too), SIGKILL if it
    lingers past the grace, or at once when `hurry()` turns true (a second Ctrl-C)."""
    for sig in (first, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + TERMINATE_GRACE_S
        while time.monotonic() < deadline and not (sig != signal.SIGKILL and hurry()):
            try:
                proc.wait(timeout=POLL_S / 2)
                return
            except subprocess.TimeoutExpired:
                continue


def _start_lifeguard(pgid: int, mark: str = "") -> subprocess.Popen[bytes] | None:
    """tracer/measure/lifeguard.py beside the worker: it SIGKILLs the worker's group if this process dies,
    even while the worker is stopped."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "tracer.measure.lifeguard", str(os.getpid()), str(pgid), *([mark] if mark else [])],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(Path(tracer.__file__).resolve().parents[1])},
        )
    except OSError:
        return None  # the worker's own lifeline still ends it unless it is stopped


def _stop_lifeguard(guard: subprocess.Popen[bytes] | None) -> None:
    """It ends by itself once the worker's group is empty; reaped here, killed if it lingers."""
    if guard is None:
        return
    try:
        guard.wait(timeout=2 * POLL_S + 1)
    except subprocess.TimeoutExpired:
        guard.kill()
        guard.wait()


def dump_stacks(folder: RunFolder, pid: int) -> None:
    """py-spy dumps of the worker and every process under it into raw/ (STALL_STACKS), before they
    are ended: where each one waits is the finding of a stalled run."""
    out = folder.path / STALL_STACKS
    try:
        pyspy: Path | None = find_pyspy()
    except UserError:
        pyspy = None
    with out.open("w") as f:
        for p in tree_pids(pid):
            f.write(f"=== pid {p}\n")
            f.flush()
            if pyspy is None:
                f.write("py-spy is not installed: `pip install py-spy` into the tracer's environment\n")
                continue
            try:
                done = subprocess.run(
                    [str(pyspy), "dump", "--pid", str(p)], capture_output=True, text=True, timeout=STACKS_TIMEOUT_S
                )
                f.write(done.stdout + done.stderr + "\n")
            except (OSError, subprocess.TimeoutExpired) as e:
                f.write(f"py-spy dump failed: {e}\n")


def _reserve(folder: RunFolder) -> None:
    """Space held back for the final run.json: a disk that fills during the run still gets its cause."""
    with (folder.raw_dir / RESERVE_FILE).open("wb") as f:
        f.write(b"\0" * RESERVE_BYTES)
        f.flush()
        os.fsync(f.fileno())


def causes(*parts: str) -> str:
    """Several reasons as one cause, `; ` between those that say something (never "kept; ; sampler")."""
    return "; ".join(p.strip().strip(";").strip() for p in parts if p and p.strip().strip(";").strip())


def _disk_full(folder: RunFolder, outcome: Outcome) -> str:
    """'disk full ...' when the run's file system ran out of space during the run (else '')."""
    try:
        free = shutil.disk_usage(folder.path).free
    except OSError:
        return ""
    said = f"{outcome.cause} {' '.join(outcome.stderr_tail)}"
    if free >= RESERVE_BYTES and "No space left" not in said and "Errno 28" not in said:
        return ""
    return f"disk full: {free // 1024} KiB free under {folder.path.parent}; what was written before is kept"


def _worker_tmp() -> Path:
    """A temp folder of the worker's own, removed when it ends. Short: multiprocessing puts Unix
    sockets in it, whose paths may not pass 107 bytes, so a long $TMPDIR gives way to /tmp."""
    base = tempfile.gettempdir()
    if len(base) > TMPDIR_MAX_CHARS or not os.access(base, os.W_OK):
        base = "/tmp"
    return Path(tempfile.mkdtemp(prefix=WORKER_TMP_PREFIX, dir=base))


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def become_subreaper() -> bool:
    """Makes this process the reaper of its orphaned descendants (Linux): a process of the command that
    left its group and outlived its parent is then still found under us, and ended. False elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def sweep_descendants(known: set[int]) -> list[int]:
    """SIGKILLs and reaps every descendant of this process not in `known` (those that were there before
    the child started, and the helpers still ending); returns their pids."""
    try:
        left = [p for p in psutil.Process().children(recursive=True) if p.pid not in known]
    except psutil.Error:
        return []
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            continue
    for p in left:
        try:
            os.waitpid(p.pid, 0)  # ours to reap once they were reparented to us
        except (ChildProcessError, OSError):
            pass
    return [p.pid for p in left]


def _end_group(pgid: int) -> None:
    """SIGKILL to whatever is left of the worker's process group once the worker itself has ended."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stderr_tail(folder: RunFolder, lines: int = STDERR_TAIL_LINES, path: Path | None = None) -> tuple[str, ...]:
    """The last non-empty lines of the worker's log (or of `path`)."""
    try:
        with (path or folder.worker_log).open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ()
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    return tuple(kept[-lines:])


def classify(
    returncode: int, ended_by: str | None, events: Sequence[Mapping[str, Any]], folder: RunFolder, spec: RunSpec
) -> Outcome:
    """Turns how the process ended into a status and a cause a person can read; a non-finite loss
    makes a run that otherwise ended well (or stopped at it) `diverged`."""
    return diverged_outcome(_ended(returncode, ended_by, events, folder, spec), divergence(events, spec.lr))


def _ended(
    returncode: int, ended_by: str | None, events: Sequence[Mapping[str, Any]], folder: RunFolder, spec: RunSpec
) -> Outcome:
    finished = any(e.get(KIND) == Event.END for e in events)
    errors = [e for e in events if e.get(KIND) == Event.ERROR]
    tail = stderr_tail(folder)
    if returncode == 0 and finished:  # every epoch trained, whatever came after (a signal as it exited)
        return Outcome(RunStatus.OK, "", 0)
    if finished and ended_by in ("timeout", "interrupted"):  # every epoch trained; stopped in its teardown
        return Outcome(RunStatus.OK, f"every epoch trained; {ended_by} during the worker's teardown", returncode)
    if returncode == EXIT_DIVERGED and any(e.get(KIND) == Event.DIVERGED for e in events):
        return Outcome(RunStatus.DIVERGED, "", returncode, None, tail)  # before a signal that came after the stop
    if ended_by == "timeout":
        return Outcome(RunStatus.TIMEOUT, f"ran past --timeout {spec.timeout_s:g} s", returncode, None, tail)
    if ended_by == "interrupted":
        cause = "interrupted (Ctrl-C, or SIGTERM, SIGHUP or SIGQUIT to the tracer)"
        return Outcome(RunStatus.INTERRUPTED, cause, returncode, None, tail)
    if ended_by == "stalled":
        cause = (
            f"no progress for {spec.stall_s:g} s (no event, no step, no CPU): ended; where each process waited"
            f" is in {STALL_STACKS}"
        )
        return Outcome(RunStatus.STALLED, cause, returncode, None, tail)
    if returncode < 0:
        sig = signal.Signals(-returncode)
        if sig in CRASH_SIGNALS:
            return Outcome(RunStatus.FAILED, f"worker crashed with {sig.name}", returncode, sig.name, tail)
        hint = " (by another process, or by the kernel's out-of-memory killer)" if sig == signal.SIGKILL else ""
        return Outcome(RunStatus.KILLED, f"worker killed by {sig.name}{hint}", returncode, sig.name, tail)
    if errors:
        return Outcome(RunStatus.FAILED, errors[-1].get("error", "worker error"), returncode, None, tail)
    if returncode == 0 and not folder.events_path.exists():
        cause = f"{folder.events_path} is gone (the run folder was deleted during the run?): the worker exited 0"
        return Outcome(RunStatus.FAILED, cause, 0, None, tail)
    if returncode == 0:
        return Outcome(RunStatus.FAILED, "worker exited 0 without finishing its epochs", 0, None, tail)
    last = tail[-1] if tail else "no output"
    return Outcome(RunStatus.FAILED, f"worker exited with code {returncode}: {last}", returncode, None, tail)


def _rank_failed(rank: int, returncode: int, folder: RunFolder, spec: RunSpec) -> Outcome:
    """A run whose rank `rank` ended badly: failed, naming the rank and that rank's own cause."""
    where = rank_launch.rank_folder(folder, rank)
    own = _ended(returncode, None, where.events(), where, spec)
    return dataclasses.replace(own, status=RunStatus.FAILED, cause=f"rank {rank} failed: {own.cause}")


def _completed(
    record: RunRecord,
    events: Sequence[Mapping[str, Any]],
    outcome: Outcome,
    sampling: Any,
    trace_files: list[str],
    dataset_dir: Path,
) -> RunRecord:
    """Fills in what the worker reported (versions, dataset, parameter counts) and how it ended."""
    by_kind: dict[str, Mapping[str, Any]] = {}
    for e in events:
        by_kind.setdefault(e[KIND], e)
    env = record.environment
    if Event.VERSIONS in by_kind:
        env = dataclasses.replace(env, framework_versions=dict(by_kind[Event.VERSIONS]["versions"]))
    dataset = None
    if Event.DATASET in by_kind:
        d = by_kind[Event.DATASET]
        dataset = DatasetInfo(str(dataset_dir), int(d["images"]), tuple(d["classes"]), int(d["images_used"]))
    model = knobs = None
    if Event.MODEL in by_kind:
        m = by_kind[Event.MODEL]
        model = ModelFacts(int(m["trainable_params"]), int(m["total_params"]))
        knobs = m.get("knobs") or {}
    start = by_kind.get(Event.START, {})
    return dataclasses.replace(
        record,
        environment=env,
        outcome=outcome,
        wall_end_ns=time.time_ns(),
        dataset=dataset,
        model=model,
        sampling=sampling,
        worker_pid=start.get("pid"),
        trace_files=tuple(trace_files),
        knobs=knobs or {},
    )
