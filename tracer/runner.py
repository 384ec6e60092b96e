"""Runs one training in a child process under the sampler and leaves a complete run folder,
however the training ends (finished, raised, crashed, killed, timed out, Ctrl-C)."""

from __future__ import annotations

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
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.markup import escape

import tracer
from tracer import rank_launch, sysinfo
from tracer.core import window
from tracer.core.cases import make_run_id
from tracer.core.divergence import diverged_outcome, divergence
from tracer.core.errors import UserError
from tracer.core.options import worker_config
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
from tracer.core.schema import DATA_MEMORY, EXIT_DIVERGED, KIND, STEPS_TABLE, Event
from tracer.dataset import check_memory_fits
from tracer.environments import EnvStatus
from tracer.nvml import Nvml
from tracer.paths import cache_root
from tracer.progress import ProgressView
from tracer.rapl import POWERCAP_ROOT, RaplReader
from tracer.sampler import Sampler
from tracer.stall import StallWatch, tree_pids
from tracer.tegrastats import TegrastatsSampler, find_tegrastats
from tracer.tracing.base import TraceBackend
from tracer.tracing.pyspy import PySpyRecorder, find_pyspy

POLL_S = 0.2
TERMINATE_GRACE_S = 5.0
STDERR_TAIL_LINES = 25
TRACER_PID_ENV = "DL_TRACER_PID"  # read by tracer/worker/lifeline.py, which must not import this module
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


class _Signals:
    """Ctrl-C (SIGINT) and `kill <tracer>` (SIGTERM), from before the run folder exists until it is
    final: the first asks the training to end (the run is `interrupted`, recorded like any other end),
    a second hurries the ending (the worker gets no grace), and none abandons it: no handler raises,
    so no signal can cut the finalising (run.json, samples to Parquet, the worker's temp folder) short.
    Twice 50 ms apart used to leave the run `running`, its samples CSV and its temp folder behind."""

    HANDLED = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.count = 0
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        self.count += 1

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


class Runner:
    def __init__(self, launch: Launch, console: Console | None = None) -> None:
        self.launch = launch
        self.console = console or Console(stderr=True)
        self.backend = launch.backend
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

    def run(self) -> tuple[RunFolder, RunRecord]:
        with self.signals:
            return self._run()

    def _run(self) -> tuple[RunFolder, RunRecord]:
        spec = self._with_window(self.launch.spec)
        self.backend.check(spec, self.launch.python.python)
        if spec.data == DATA_MEMORY:  # before any folder: a set that cannot fit is refused, not a failed run
            check_memory_fits(self.launch.dataset_dir, spec.limit, spec.image_size)
        if spec.nproc > 1 and spec.trace != "none":
            raise UserError(
                "--nproc with --trace is not built: trace the ranks with the PyTorch profiler in your own script "
                "and `tracer import` their traces together (a folder or a .tar of them)"
            )
        pyspy = find_pyspy() if spec.pyspy else None
        nvml, nvml_status = Nvml.open()
        self._rapl, rapl_status = RaplReader.open(Path(os.environ.get(POWERCAP_ROOT_ENV, POWERCAP_ROOT)))
        self._tegrastats = find_tegrastats(nvml is not None)
        env = dataclasses.replace(
            sysinfo.collect(nvml, nvml_status),
            worker_python=self.launch.python.python,
            worker_python_version=self.launch.python.python_version,
        )
        env = with_energy_sources(env, self._rapl, rapl_status, self._tegrastats)
        if self.signals.count:  # before any folder: nothing to record
            raise KeyboardInterrupt
        folder = RunFolder.create(self.launch.out_dir, make_run_id(spec))
        record = RunRecord(
            run_id=folder.run_id,
            spec=spec,
            environment=env,
            outcome=Outcome(RunStatus.RUNNING, "training"),
            wall_start_ns=time.time_ns(),
            tracer_pid=os.getpid(),
        )
        try:  # run.json and the space for its final version come before any stream
            folder.write_record(record)
            config = worker_config(spec, dataset_dir=str(self.launch.dataset_dir))
            folder.worker_config_path.write_text(json.dumps(config, indent=2, allow_nan=False) + "\n")
            _reserve(folder)
        except OSError as e:
            shutil.rmtree(folder.path, ignore_errors=True)
            raise UserError(
                f"cannot start a run in {self.launch.out_dir}: {e.strerror or e} (free some space)"
            ) from None
        self.console.print(f"run {folder.run_id}: {spec.framework} {spec.model} on {spec.dataset}, {spec.device}")
        try:
            outcome, sampling, events = self._train(folder, nvml, pyspy)
        finally:
            if nvml is not None:
                nvml.close()
        full = _disk_full(folder, outcome)
        (folder.raw_dir / RESERVE_FILE).unlink(missing_ok=True)  # its space is for the final run.json
        if full:
            outcome = dataclasses.replace(outcome, cause=f"{full}; {outcome.cause}".rstrip("; "))
            self.console.print(f"[red]{full}[/red]")
            trace_files = self._pyspy_files
        else:
            trace_files = self._finish_traces(folder) + self._pyspy_files
        record = dataclasses.replace(
            _completed(record, events, outcome, sampling, trace_files, self.launch.dataset_dir),
            measurement_cost=self.cost,
            ranks=self._ranks,
        )
        if nvml is not None and nvml.unavailable:  # each NVML reading the run did not get, and why
            env = dataclasses.replace(record.environment, nvml_unavailable=dict(nvml.unavailable))
            record = dataclasses.replace(record, environment=env)
        folder.write_record(record)
        problems = folder.finalise_samples()
        if problems:
            self.console.print(f"[yellow]samples:[/yellow] {'; '.join(problems)}")
        return folder, record

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
        cmd = self.backend.command(cmd, folder, spec)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(worker_pythonpath())
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.backend.environment(folder, spec))
        env[TRACER_PID_ENV] = str(os.getpid())  # the worker dies with this process (tracer/worker/lifeline.py)
        worker_tmp = _worker_tmp()
        env["TMPDIR"] = str(worker_tmp)  # PyTorch's /tmp/pymp-* land here and go with it
        started = time.monotonic()
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        world = spec.nproc
        if world > 1:  # one group: ending it, the lifeguard and the lifeline reach every rank
            python = self.launch.python.python
            procs = rank_launch.start(
                folder, world, lambda where: [python, "-m", "tracer.worker", str(where.path)], env
            )
            proc = procs[0]
        else:
            with folder.worker_log.open("wb") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            procs = [proc]
        guard = _start_lifeguard(proc.pid)
        failed_rank: int | None = None

        def target_pid() -> int | None:
            pid = _read_pid(folder)
            return pid if pid is not None else (None if self.backend.wraps_process else proc.pid)

        sampler = Sampler(folder, target_pid, spec.sample_hz, nvml, self._rapl)
        sampler.start()
        rank_samplers = [  # each rank's process tree apart, into its own folder; the machine's sources once
            Sampler(where, functools.partial(rank_launch.read_pid, where), spec.sample_hz, None)
            for where in rank_launch.folders(folder, world)[1:]
        ]
        for s in rank_samplers:
            s.start()
        tegra = TegrastatsSampler(folder, self._tegrastats, spec.sample_hz) if self._tegrastats else None
        if tegra is not None:
            tegra.start()
        windowed = window.of_record(spec) is not None
        spy = PySpyRecorder(folder, pyspy, windowed) if pyspy is not None else None
        view = ProgressView(self.console, folder.events_path, spec.epochs)
        stall = StallWatch([folder.events_path, folder.sample_stream_path(STEPS_TABLE)], spec.stall_s)
        ended_by: str | None = None

        def hurry() -> bool:
            return self.signals.hurry

        try:
            while rank_launch.running(procs):
                view.poll()
                failed_rank = rank_launch.first_failed(procs) if world > 1 else None
                if failed_rank is not None:  # the others would wait for it in their next collective
                    ended_by = "rank-failed"
                    _terminate(proc, hurry)
                    break
                if spy is not None:
                    spy.poll(_read_pid(folder))
                if self.signals.count:
                    ended_by = "interrupted"
                    _terminate(proc, hurry)
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
            _terminate(proc, hurry)
        finally:
            for p in procs:
                p.wait()
            _end_group(proc.pid)  # loader processes outlive a worker that died by itself
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
            view.close()
        if ended_by is None and self.signals.count:
            # the signal reached the worker's group too (Slurm's scancel signals every process of the job,
            # a terminal's Ctrl-C the foreground group): the worker may be gone before the loop saw the count
            ended_by = "interrupted"
        self.cost = measurement_cost(sampling, children_before, time.monotonic() - started)
        events = folder.events()  # read once, now that the worker has ended
        returncode = self.backend.worker_returncode(proc.returncode, events)
        outcome = classify(returncode, ended_by, events, folder, spec)
        if failed_rank is not None:
            outcome = _rank_failed(failed_rank, procs[failed_rank].returncode, folder, spec)
        if sampler.error:
            outcome = dataclasses.replace(outcome, cause=f"{outcome.cause}; sampler stopped early: {sampler.error}")
        if tegra is not None and (tegra.error or tegra.warnings):
            self.console.print(f"[yellow]tegrastats:[/yellow] {escape(tegra.error or tegra.warnings[0])}")
        return outcome, sampling, events

    def _finish_traces(self, folder: RunFolder) -> list[str]:
        try:
            return self.backend.finish(folder)
        except Exception as e:  # noqa: BLE001 - a trace that cannot be ingested must not lose the run
            self.console.print(f"[yellow]trace not ingested:[/yellow] {type(e).__name__}: {e}")
            return []


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


def _terminate(proc: subprocess.Popen[bytes], hurry: Callable[[], bool] = lambda: False) -> None:
    """SIGTERM to the worker's whole process group (DataLoader workers too), SIGKILL if it lingers
    past the grace, or at once when `hurry()` turns true (a second Ctrl-C)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + TERMINATE_GRACE_S
        while time.monotonic() < deadline and not (sig == signal.SIGTERM and hurry()):
            try:
                proc.wait(timeout=POLL_S / 2)
                return
            except subprocess.TimeoutExpired:
                continue


def _start_lifeguard(pgid: int) -> subprocess.Popen[bytes] | None:
    """tracer/lifeguard.py beside the worker: it SIGKILLs the worker's group if this process dies,
    even while the worker is stopped."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "tracer.lifeguard", str(os.getpid()), str(pgid)],
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


def _end_group(pgid: int) -> None:
    """SIGKILL to whatever is left of the worker's process group once the worker itself has ended."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stderr_tail(folder: RunFolder, lines: int = STDERR_TAIL_LINES) -> tuple[str, ...]:
    try:
        with folder.worker_log.open("rb") as f:
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
    if ended_by == "timeout":
        return Outcome(RunStatus.TIMEOUT, f"ran past --timeout {spec.timeout_s:g} s", returncode, None, tail)
    if ended_by == "interrupted":
        return Outcome(RunStatus.INTERRUPTED, "interrupted (Ctrl-C or SIGTERM to the tracer)", returncode, None, tail)
    if ended_by == "stalled":
        cause = (
            f"no progress for {spec.stall_s:g} s (no event, no step, no CPU): ended; where each process waited"
            f" is in {STALL_STACKS}"
        )
        return Outcome(RunStatus.STALLED, cause, returncode, None, tail)
    if returncode == EXIT_DIVERGED and any(e.get(KIND) == Event.DIVERGED for e in events):
        return Outcome(RunStatus.DIVERGED, "", returncode, None, tail)
    if returncode < 0:
        sig = signal.Signals(-returncode)
        if sig in CRASH_SIGNALS:
            return Outcome(RunStatus.FAILED, f"worker crashed with {sig.name}", returncode, sig.name, tail)
        hint = " (the kernel's out-of-memory killer sends SIGKILL)" if sig == signal.SIGKILL else ""
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
