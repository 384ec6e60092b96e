"""Runs one training in a child process under the sampler and leaves a complete run folder,
however the training ends (finished, raised, crashed, killed, timed out, Ctrl-C)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

import tracer
from tracer import sysinfo, tracing
from tracer.cases import make_run_id
from tracer.environments import EnvStatus
from tracer.nvml import Nvml
from tracer.paths import cache_root
from tracer.progress import ProgressView
from tracer.records import DatasetInfo, ModelFacts, Outcome, RunRecord, RunSpec, RunStatus
from tracer.runfolder import RunFolder, read_jsonl
from tracer.sampler import Sampler
from tracer.tracing.pyspy import PySpyRecorder, find_pyspy

POLL_S = 0.2
TERMINATE_GRACE_S = 5.0
STDERR_TAIL_LINES = 25
CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}


@dataclass(frozen=True)
class Launch:
    """What the runner needs besides the spec: the interpreter, the dataset folder, where to write."""

    spec: RunSpec
    python: EnvStatus
    dataset_dir: Path
    out_dir: Path
    fault: str | None = None  # deliberate worker failure, for tests: KIND@EPOCH


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


def worker_config(launch: Launch) -> dict[str, Any]:
    s = launch.spec
    return {
        "framework": s.framework,
        "model": s.model,
        "dataset_dir": str(launch.dataset_dir),
        "device": s.device,
        "batch": s.batch,
        "epochs": s.epochs,
        "limit": s.limit,
        "image_size": s.image_size,
        "num_classes": s.num_classes,
        "lr": s.lr,
        "momentum": s.momentum,
        "seed": s.seed,
        "workers": s.workers,
        "prefetch": s.prefetch,
        "pipeline": s.pipeline,
        "sync_every": s.sync_every,
        "threads": s.threads,
        "amp": s.amp,
        "gpu_thread_mode": s.gpu_thread_mode,
        "fault": launch.fault,
    }


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """`kill <tracer>` ends the run like Ctrl-C does: recorded, not lost."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Runner:
    def __init__(self, launch: Launch, console: Console | None = None) -> None:
        self.launch = launch
        self.console = console or Console(stderr=True)
        self.backend = tracing.backend(launch.spec.trace)
        self._pyspy_files: list[str] = []

    def run(self) -> tuple[RunFolder, RunRecord]:
        spec = self.launch.spec
        self.backend.check(spec, self.launch.python.python)
        pyspy = find_pyspy() if spec.pyspy else None
        nvml, nvml_status = Nvml.open()
        env = dataclasses.replace(
            sysinfo.collect(nvml, nvml_status),
            worker_python=self.launch.python.python,
            worker_python_version=self.launch.python.python_version,
        )
        folder = RunFolder.create(self.launch.out_dir, make_run_id(spec))
        folder.worker_config_path.write_text(json.dumps(worker_config(self.launch), indent=2) + "\n")
        record = RunRecord(
            run_id=folder.run_id,
            spec=spec,
            environment=env,
            outcome=Outcome(RunStatus.RUNNING, "training"),
            wall_start_ns=time.time_ns(),
            tracer_pid=os.getpid(),
        )
        folder.write_record(record)
        self.console.print(f"run {folder.run_id}: {spec.framework} {spec.model} on {spec.dataset}, {spec.device}")
        try:
            outcome, sampling = self._train(folder, nvml, pyspy)
        finally:
            if nvml is not None:
                nvml.close()
        trace_files = self._finish_traces(folder) + self._pyspy_files
        folder.finalise_samples()
        record = _completed(record, folder, outcome, sampling, trace_files)
        folder.write_record(record)
        return folder, record

    def _train(self, folder: RunFolder, nvml: Nvml | None, pyspy: Path | None = None) -> tuple[Outcome, Any]:
        spec = self.launch.spec
        cmd = [self.launch.python.python, "-m", "tracer.worker", str(folder.path)]
        cmd = self.backend.command(cmd, folder)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(worker_pythonpath())
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.backend.environment(folder))
        started = time.monotonic()
        with folder.worker_log.open("wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

        def target_pid() -> int | None:
            pid = _read_pid(folder)
            return pid if pid is not None else (None if self.backend.wraps_process else proc.pid)

        sampler = Sampler(folder, target_pid, spec.sample_hz, nvml)
        sampler.start()
        spy = PySpyRecorder(folder, pyspy) if pyspy is not None else None
        view = ProgressView(self.console, folder.events_path, spec.epochs)
        ended_by: str | None = None
        try:
            with _sigterm_as_interrupt():
                while proc.poll() is None:
                    view.poll()
                    if spy is not None:
                        spy.poll(_read_pid(folder))
                    if spec.timeout_s is not None and time.monotonic() - started > spec.timeout_s:
                        ended_by = "timeout"
                        _terminate(proc)
                        break
                    time.sleep(POLL_S)
        except KeyboardInterrupt:
            ended_by = "interrupted"
            _terminate(proc)
        finally:
            proc.wait()
            if spy is not None:
                self._pyspy_files = spy.stop()
                if spy.error:
                    self.console.print(f"[yellow]py-spy:[/yellow] {spy.error}")
            sampling = sampler.stop()
            view.close()
        returncode = self.backend.worker_returncode(proc.returncode, folder)
        outcome = classify(returncode, ended_by, folder, spec)
        if sampler.error:
            outcome = dataclasses.replace(outcome, cause=f"{outcome.cause}; sampler stopped early: {sampler.error}")
        return outcome, sampling

    def _finish_traces(self, folder: RunFolder) -> list[str]:
        try:
            return self.backend.finish(folder)
        except Exception as e:  # noqa: BLE001 - a trace that cannot be ingested must not lose the run
            self.console.print(f"[yellow]trace not ingested:[/yellow] {type(e).__name__}: {e}")
            return []


def _read_pid(folder: RunFolder) -> int | None:
    try:
        return int(folder.worker_pid_path.read_text().strip())
    except (OSError, ValueError):
        return None


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the worker's whole process group (DataLoader workers too), SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGTERM, TERMINATE_GRACE_S), (signal.SIGKILL, TERMINATE_GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


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


def classify(returncode: int, ended_by: str | None, folder: RunFolder, spec: RunSpec) -> Outcome:
    """Turns how the process ended into a status and a cause a person can read."""
    events = list(read_jsonl(folder.events_path))
    finished = any(e.get("kind") == "end" for e in events)
    errors = [e for e in events if e.get("kind") == "error"]
    tail = stderr_tail(folder)
    if ended_by == "timeout":
        return Outcome(RunStatus.TIMEOUT, f"ran past --timeout {spec.timeout_s:g} s", returncode, None, tail)
    if ended_by == "interrupted":
        return Outcome(RunStatus.INTERRUPTED, "interrupted (Ctrl-C or SIGTERM to the tracer)", returncode, None, tail)
    if returncode == 0 and finished:
        return Outcome(RunStatus.OK, "", 0)
    if returncode < 0:
        sig = signal.Signals(-returncode)
        if sig in CRASH_SIGNALS:
            return Outcome(RunStatus.FAILED, f"worker crashed with {sig.name}", returncode, sig.name, tail)
        hint = " (the kernel's out-of-memory killer sends SIGKILL)" if sig == signal.SIGKILL else ""
        return Outcome(RunStatus.KILLED, f"worker killed by {sig.name}{hint}", returncode, sig.name, tail)
    if errors:
        return Outcome(RunStatus.FAILED, errors[-1].get("error", "worker error"), returncode, None, tail)
    if returncode == 0:
        return Outcome(RunStatus.FAILED, "worker exited 0 without finishing its epochs", 0, None, tail)
    last = tail[-1] if tail else "no output"
    return Outcome(RunStatus.FAILED, f"worker exited with code {returncode}: {last}", returncode, None, tail)


def _completed(
    record: RunRecord, folder: RunFolder, outcome: Outcome, sampling: Any, trace_files: list[str]
) -> RunRecord:
    """Fills in what the worker reported (versions, dataset, parameter counts) and how it ended."""
    events = folder.events()
    by_kind: dict[str, dict[str, Any]] = {}
    for e in events:
        by_kind.setdefault(e["kind"], e)
    env = record.environment
    if "versions" in by_kind:
        env = dataclasses.replace(env, framework_versions=dict(by_kind["versions"]["versions"]))
    dataset = None
    if "dataset" in by_kind:
        d = by_kind["dataset"]
        dataset_dir = json.loads(folder.worker_config_path.read_text())["dataset_dir"]
        dataset = DatasetInfo(dataset_dir, int(d["images"]), tuple(d["classes"]), int(d["images_used"]))
    model = knobs = None
    if "model" in by_kind:
        m = by_kind["model"]
        model = ModelFacts(int(m["trainable_params"]), int(m["total_params"]))
        knobs = m.get("knobs") or {}
    start = by_kind.get("start", {})
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
