"""`tracer profile -- COMMAND`: a user's own training as the measured child, measured as the built-in
workload is (the runner's `Supervisor`: sampler over the whole process tree, NVML, energy, nsys,
py-spy, timeout, stall watch, Ctrl-C, the lifeguard) and ending in the same states.

The command's stdout and stderr reach our terminal unchanged and are kept in raw/. Every Python process
it starts gets the probe (tracer/probe/, staged by `probe_pythonpath`), which writes the steps table
(one file per process, joined here when the run ends) and epoch events into the run folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import signal
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.csv as pacsv
from rich.console import Console

import tracer
from tracer.core.cases import NO_FRAMEWORK, UNKNOWN_MODEL
from tracer.core.divergence import diverged_outcome, divergence
from tracer.core.errors import UserError
from tracer.core.paths import cache_root
from tracer.core.records import Outcome, RankInfo, RunRecord, RunSpec, RunStatus
from tracer.core.runfolder import RunFolder, read_csv_stream
from tracer.core.schema import (
    KIND,
    PROBE,
    PROBE_MODULE,
    PROBE_RUN_DIR_ENV,
    PROBE_SOURCE_DIR,
    PROBE_STEPS_SEPARATOR,
    PROBED_IMPORTS,
    RANK,
    SAMPLE_TABLES,
    STEP_COLUMNS,
    STEP_PARTS_TABLE,
    STEPS_TABLE,
    Event,
)
from tracer.core.workload import CommandWorkload, Measurement
from tracer.measure.outcome import ended_by_signal, interrupted_cause, last_said, stderr_tail
from tracer.measure.process import STALL_STACKS, Child
from tracer.measure.supervisor import Supervisor
from tracer.measure.tracing.base import TraceBackend
from tracer.measure.tracing.pyspy import find_pyspy

STDOUT_LOG = "raw/stdout.log"
STDERR_LOG = "raw/stderr.log"
#: Trace backends that work on a command: nsys on any process tree, the PyTorch profiler through the probe
#: (tracer/probe/torch_window.py); the others run inside the built-in worker.
COMMAND_TRACES = ("none", "nsys", "torch")
#: Trace backends that take a trace window beside a command (the probe opens and closes them at its steps).
COMMAND_WINDOWED_TRACES = ("torch",)
PROBE_OFF = "off"
PROBE_ON = "on"


@dataclass(frozen=True)
class CommandLaunch:
    """A command to measure: argv as the user typed it, where it runs, and how it is measured."""

    argv: tuple[str, ...]
    cwd: Path
    spec: RunSpec  # its measuring options (trace, sampling, timeout, stall); its workload fields are unused
    out_dir: Path
    backend: TraceBackend
    probe: bool = True


def resolve_executable(argv0: str, cwd: Path) -> str:
    """The file `argv0` starts, or a UserError saying why it cannot start (before any run folder)."""
    if "/" in argv0:
        path = Path(os.path.abspath(cwd / argv0))  # not resolved: a venv's python is a link that must stay one
        if not path.exists():
            raise UserError(f"cannot start the command: {argv0} does not exist")
        if path.is_dir() or not os.access(path, os.X_OK):
            raise UserError(
                f"cannot start the command: {argv0} is not executable (chmod +x it, or run it with its interpreter)"
            )
        return check_startable(argv0, str(path))
    found = shutil.which(argv0)
    if found is None:
        raise UserError(f"cannot start the command: '{argv0}' is not found on PATH")
    return check_startable(argv0, found)


ELF_MAGIC = b"\x7fELF"


def check_startable(argv0: str, path: str) -> str:
    """`path`, when the kernel can start it: a program (ELF) or a script whose `#!` line names an
    interpreter that exists. An empty or binary file, or a missing interpreter, is a UserError here,
    before any run folder (the kernel's own refusal came after it, and left it behind)."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError as e:
        raise UserError(f"cannot start the command: {argv0} cannot be read ({e.strerror or e})") from None
    if head.startswith(ELF_MAGIC):
        return path
    if not head.startswith(b"#!"):
        what = "an empty file" if not head else "neither a program nor a script with a #! line"
        raise UserError(f"cannot start the command: {argv0} is {what} (run it with its interpreter)")
    words = head[2:].split(b"\n", 1)[0].split()
    interpreter = words[0].decode(errors="replace") if words else ""
    if not interpreter or not os.access(interpreter, os.X_OK) or os.path.isdir(interpreter):
        raise UserError(
            f"cannot start the command: the #! line of {argv0} names {interpreter or 'no interpreter'}, "
            "which is not an executable here (fix its first line, or run it with its interpreter)"
        )
    return path


def probe_pythonpath() -> Path:
    """A folder holding only `sitecustomize.py` and the probe as `dltracer_probe` (links into this
    source tree), put first on the command's PYTHONPATH: none of the tool's own packages come with it."""
    source = Path(tracer.__file__).resolve().parent / PROBE_SOURCE_DIR
    stage = cache_root() / "probe-path" / hashlib.sha256(str(source).encode()).hexdigest()[:16]
    stage.mkdir(parents=True, exist_ok=True)
    for name, target in ((PROBE_MODULE, source), ("sitecustomize.py", source / "sitecustomize.py")):
        link = stage / name
        if link.is_symlink() and link.resolve() == target:
            continue
        tmp = stage / f"{name}.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target, target_is_directory=target.is_dir())
        os.replace(tmp, link)
    return stage


def label_of(argv: Sequence[str]) -> str:
    """A short name for a command in run ids: its script's stem (`train` for `torchrun ... train.py`)."""
    scripts = [a for a in argv if a.endswith((".py", ".sh"))]
    if "-m" in argv[:-1]:
        name = argv[list(argv).index("-m") + 1]
    else:
        name = Path(scripts[-1] if scripts else argv[0]).stem
    return re.sub(r"[^A-Za-z0-9_]+", "-", name).strip("-")[:40] or "command"


DIGEST_MAX_BYTES = 16 * 1024 * 1024  # a larger file named by the command is data, not its script or config
ELF_MAGIC = b"\x7fELF"


def script_digest(argv: Sequence[str], cwd: Path) -> str:
    """sha256 (16 hex digits) over the files the command names (`train.py`, `--config=cfg.yaml`), each
    under its argument's position, so an edited script is not a repeat of its old self. Programs (ELF
    files: the interpreter; torchrun, a Python script, counts), folders and files past
    DIGEST_MAX_BYTES are left out; '' where it names none."""
    digest = hashlib.sha256()
    named = 0
    for i, arg in enumerate(argv):
        for text in {arg, arg.partition("=")[2]} - {""}:
            path = Path(text) if os.path.isabs(text) else cwd / text
            try:
                if not path.is_file() or path.stat().st_size > DIGEST_MAX_BYTES:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            if data.startswith(ELF_MAGIC):
                continue
            digest.update(f"{i}:{text}\0".encode() + hashlib.sha256(data).digest())
            named += 1
    return digest.hexdigest()[:16] if named else ""


def command_text(argv: Sequence[str], limit: int = 80) -> str:
    """The command as one line, shortened in the middle past `limit` characters."""
    import shlex

    from tracer.core.text import printable_argv

    text = shlex.join(printable_argv(argv))
    return text if len(text) <= limit else text[: limit // 2 - 2] + " ... " + text[-(limit // 2 - 3) :]


class CommandRunner(Supervisor):
    def __init__(self, launch: CommandLaunch, console: Console | None = None) -> None:
        super().__init__(launch.backend, console)
        self.launch = launch

    def _run(self) -> tuple[RunFolder, RunRecord]:
        launch = self.launch
        resolve_executable(launch.argv[0], launch.cwd)
        spec = launch.spec
        self.backend.check(spec)
        pyspy = find_pyspy() if spec.pyspy else None
        nvml, env = self.open_machine("", "")
        if self.signals.count:
            raise KeyboardInterrupt
        spec = dataclasses.replace(spec, device="gpu" if env.gpus else "cpu")
        info = CommandWorkload(
            argv=launch.argv,
            cwd=str(launch.cwd),
            interpreter="",
            probe=PROBE_ON if launch.probe else PROBE_OFF,
            script_digest=script_digest(launch.argv, launch.cwd),
        )
        stamp = time.strftime("%Y%m%d-%H%M%S")
        record = RunRecord(
            run_id=f"{stamp}-cmd-{label_of(launch.argv)}-{uuid.uuid4().hex[:4]}",
            workload=info,
            measurement=Measurement.of_spec(spec),
            environment=env,
            outcome=Outcome(RunStatus.RUNNING, "training"),
            wall_start_ns=time.time_ns(),
            tracer_pid=os.getpid(),
        )
        folder = self.start_folder(launch.out_dir, record, None)
        self.console.print(f"run {folder.run_id}: {command_text(launch.argv)}")
        child_env = dict(os.environ)
        run_dir = os.path.abspath(folder.path)  # the command may chdir, or start a child elsewhere
        if launch.probe:
            child_env[PROBE_RUN_DIR_ENV] = run_dir
            path = os.environ.get("PYTHONPATH")
            child_env["PYTHONPATH"] = str(probe_pythonpath()) + (os.pathsep + path if path else "")
        child_env.setdefault("PYTHONUNBUFFERED", "1")  # a pipe, not a terminal: output still comes as it is written
        child = Child(
            list(launch.argv),
            child_env,
            cwd=str(launch.cwd),
            tee=(folder.path / STDOUT_LOG, folder.path / STDERR_LOG),
            interrupt_signal=None,  # each signal the tracer gets reaches the command as itself
            pid_file=False,
            progress_files=(folder.path / STDOUT_LOG, folder.path / STDERR_LOG),
            sweep=True,
            mark=f"{PROBE_RUN_DIR_ENV}={run_dir}" if launch.probe else "",
        )
        try:
            ended = self.supervise(folder, child, spec, nvml, pyspy)
        finally:
            if nvml is not None:
                nvml.close()
        join_probe_steps(folder)
        events = folder.events()
        returncode = self.backend.worker_returncode(ended.returncode, [])
        # under a wrapping backend the app's signal death comes back as 128+N: a signal death is the wrapper's own
        wrapper_died = self.backend.wraps_process and ended.returncode < 0
        who = f"the {self.backend.name} launcher" if wrapper_died else "the command"
        outcome = classify_command(returncode, ended.ended_by, events, folder, spec, self.signals.last, who)
        outcome = self._with_sampler_error(outcome, ended)

        def complete(outcome: Outcome, trace_files: list[str]) -> RunRecord:
            return _completed(record, events, outcome, ended.sampling, trace_files)

        return folder, self.finish_folder(folder, outcome, complete, nvml)


def join_probe_steps(folder: RunFolder) -> None:
    """The probed processes' step files (samples/steps-<pid>.csv, step_parts-<pid>.csv) as one stream
    each, ordered by rank and start time (epoch and step); the per-process files are removed once it is written."""
    join_probe_table(folder, STEPS_TABLE, (RANK, STEP_COLUMNS[3]))
    join_probe_table(folder, STEP_PARTS_TABLE, (RANK, *STEP_COLUMNS[:2]))


def join_probe_table(folder: RunFolder, name: str, order: tuple[str, ...]) -> None:
    parts = sorted(folder.samples_dir.glob(f"{name}{PROBE_STEPS_SEPARATOR}*.csv"))
    if not parts:
        return
    declared = SAMPLE_TABLES[name].schema
    tables = []
    for part in parts:
        try:
            tables.append(read_csv_stream(part, declared))
        except (pa.ArrowException, OSError, ValueError):
            continue
    if tables:
        table = pa.concat_tables(tables).sort_by([(k, "ascending") for k in order])
        pacsv.write_csv(table, folder.sample_stream_path(name))
    for part in parts:
        part.unlink(missing_ok=True)


def classify_command(
    returncode: int,
    ended_by: str | None,
    events: Sequence[Mapping[str, Any]],
    folder: RunFolder,
    spec: RunSpec,
    signum: int = signal.SIGINT,
    who: str = "the command",
) -> Outcome:
    """How a command ended, in the states of a built-in run: its exit status is the only word it has
    (no `end` event), a divergence the probe saw makes it `diverged`. `signum`: the signal that
    interrupted the tracer; `who`: what a signal death is blamed on (the nsys launcher, not the command)."""
    tail = stderr_tail(folder, path=folder.path / STDERR_LOG)
    if ended_by == "timeout":
        return Outcome(RunStatus.TIMEOUT, f"ran past --timeout {spec.timeout_s:g} s", returncode, None, tail)
    if ended_by == "interrupted":
        return Outcome(RunStatus.INTERRUPTED, interrupted_cause(signum, "the command"), returncode, None, tail)
    if ended_by == "stalled":
        cause = f"no progress for {spec.stall_s:g} s (no output, step or CPU): ended; stacks in {STALL_STACKS}"
        return Outcome(RunStatus.STALLED, cause, returncode, None, tail)
    found = divergence(events)
    if found is not None:
        return diverged_outcome(Outcome(RunStatus.OK, "", returncode, None, tail), found)
    if returncode == 0:
        return Outcome(RunStatus.OK, "", 0)
    if returncode < 0:
        return ended_by_signal(returncode, who, tail)
    last = last_said(tail, "no output on stderr")
    return Outcome(RunStatus.FAILED, f"the command exited with code {returncode}: {last}", returncode, None, tail)


def frameworks_of(events: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The declared frameworks the probe saw imported, in the order it saw them, with their versions."""
    seen: dict[str, None] = {}
    for e in events:
        if e.get(KIND) == Event.VERSIONS:
            for module in e.get("versions") or {}:
                if module in PROBED_IMPORTS:
                    seen[PROBED_IMPORTS[module]] = None
    return tuple(seen)


def _versions(events: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in events:
        if e.get(KIND) == Event.VERSIONS:
            out.update({str(k): str(v) for k, v in (e.get("versions") or {}).items()})
    return out


def _ranks(events: Sequence[Mapping[str, Any]], host: str) -> tuple[RankInfo, ...]:
    """The ranks of a data-parallel command (processes whose environment gave a world size over 1)."""
    by_rank: dict[int, RankInfo] = {}
    for e in events:
        if e.get(KIND) != Event.START or int(e.get("world_size") or 1) <= 1:
            continue
        rank = int(e.get(RANK) or 0)
        by_rank.setdefault(rank, RankInfo(rank, rank, int(e["world_size"]), host, pid=e.get("pid")))
    return tuple(by_rank[r] for r in sorted(by_rank))


def _completed(
    record: RunRecord, events: Sequence[Mapping[str, Any]], outcome: Outcome, sampling: Any, trace_files: list[str]
) -> RunRecord:
    """What the probe reported (interpreter, frameworks, versions, ranks) and how the command ended."""
    starts = [e for e in events if e.get(KIND) == Event.START]
    frameworks = frameworks_of(events)
    assert isinstance(record.workload, CommandWorkload)
    python = str(starts[0].get("python") or "") if starts else ""
    command = msgspec.structs.replace(record.workload, interpreter=python, frameworks_imported=frameworks)
    env = dataclasses.replace(
        record.environment,
        framework_versions=_versions(events),
        worker_python=python,
        worker_python_version=str(starts[0].get("python_version") or "") if starts else "",
    )
    measured = dataclasses.replace(record.measurement, framework=frameworks[0] if frameworks else NO_FRAMEWORK)
    return dataclasses.replace(
        record,
        workload=command,
        measurement=measured,
        environment=env,
        outcome=outcome,
        wall_end_ns=time.time_ns(),
        sampling=sampling,
        worker_pid=starts[0].get("pid") if starts else None,
        trace_files=tuple(trace_files),
        ranks=_ranks(events, env.hostname),
        knobs=_loader_knobs(events),
    )


def _loader_knobs(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The input pipeline's settings the probe read (num_workers, pin_memory ...), under its name."""
    out: dict[str, Any] = {}
    for e in events:
        if e.get(KIND) == Event.LOADER and isinstance(e.get("knobs"), Mapping):
            for key, value in e["knobs"].items():
                out.setdefault(f"{e.get(PROBE)}.{key}", value)
    return out


def command_spec(values: Mapping[str, Any]) -> RunSpec:
    """The launch spec of a command run, for the supervisor and the trace backends, which take a RunSpec: only
    its measuring options are read (`Measurement.of_spec`); its placeholder model and dataset are never stored."""
    return RunSpec(framework=NO_FRAMEWORK, model=UNKNOWN_MODEL, dataset=UNKNOWN_MODEL, **values)  # type: ignore[arg-type]
