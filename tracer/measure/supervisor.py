"""What every run shares, whatever it runs: the machine's measuring sources, the one child-process path
(`Supervisor.supervise`: the sampler, energy, py-spy, the timeout, the stall watch and Ctrl-C around
the child) and the run folder from its first run.json to its final one."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import resource
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.markup import escape

from tracer.core import window
from tracer.core.errors import UserError
from tracer.core.records import (
    EnvironmentInfo,
    MeasurementCost,
    Outcome,
    RankInfo,
    RunRecord,
    RunSpec,
)
from tracer.core.runfolder import RunFolder
from tracer.core.schema import STEPS_TABLE
from tracer.measure import rank_launch, sysinfo
from tracer.measure.nvml import Nvml
from tracer.measure.outcome import causes
from tracer.measure.process import (
    POLL_S,
    PUMP_GRACE_S,
    Child,
    Ended,
    Signals,
    Tee,
    become_subreaper,
    dump_stacks,
    end_group,
    read_pid,
    start_lifeguard,
    stop_lifeguard,
    sweep_descendants,
    terminal_like,
    terminate,
    worker_tmp,
)
from tracer.measure.rapl import POWERCAP_ROOT, RaplReader
from tracer.measure.sampler import Sampler
from tracer.measure.stall import StallWatch
from tracer.measure.tegrastats import TegrastatsSampler, find_tegrastats
from tracer.measure.tracing.base import TraceBackend
from tracer.measure.tracing.pyspy import PySpyRecorder

RESERVE_FILE = ".reserve"  # in raw/, removed before the final run.json is written
RESERVE_BYTES = 256 * 1024
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
        self.signals = Signals()
        self._ranks: tuple[RankInfo, ...] = ()
        self.ended_by: str | None = None  # what ended the last supervised child (None: itself)

    def run(self) -> tuple[RunFolder, RunRecord]:
        """The run, the terminal's signals counted from its first step (acted on where the run can)."""
        with self.signals:
            return self._run()

    def _run(self) -> tuple[RunFolder, RunRecord]:
        raise NotImplementedError  # what is run: the built-in worker (Runner) or a command (CommandRunner)

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
            reserve(folder)
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
        full = disk_full(folder, outcome)
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
        cmd = self.backend.command(child.argv, folder, spec, child.pid_file)
        env = {**child.env, **self.backend.environment(folder, spec)}
        tmp_dir = worker_tmp()
        env["TMPDIR"] = str(tmp_dir)  # PyTorch's /tmp/pymp-* land here and go with it
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
            pumps: list[Tee] = []
        elif child.tee is None:
            with folder.worker_log.open("wb") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            pumps = []
        else:  # the command's own output: to our terminal as it comes, byte for byte, and into raw/
            terminals = [terminal_like(fd) for fd in (1, 2)]  # a terminal where ours is one, else a pipe
            try:
                proc = subprocess.Popen(
                    cmd,
                    stdin=None,
                    stdout=terminals[0][1] if terminals[0] else subprocess.PIPE,
                    stderr=terminals[1][1] if terminals[1] else subprocess.PIPE,
                    env=env,
                    cwd=child.cwd,
                    start_new_session=True,
                )
            except BaseException:
                for t in terminals:
                    if t is not None:
                        t[0].close()
                raise
            finally:
                for t in terminals:
                    if t is not None:
                        os.close(t[1])  # the child's end is the child's alone: its last close is our end of file
            sources = [t[0] if t else pipe for t, pipe in zip(terminals, (proc.stdout, proc.stderr))]
            pumps = [Tee(sources[0], 1, child.tee[0]), Tee(sources[1], 2, child.tee[1])]
        guard = start_lifeguard(proc.pid, child.mark)

        def target_pid() -> int | None:
            pid = read_pid(folder) if self.backend.wraps_process else None  # the worker's or the command's
            return pid if pid is not None else (None if self.backend.wraps_process else proc.pid)

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
                    guard = start_lifeguard(proc.pid, child.mark)
                failed_rank = rank_launch.first_failed(procs) if world > 1 else None
                if failed_rank is not None:  # the others would wait for it in their next collective
                    ended_by = "rank-failed"
                    terminate(proc, hurry)
                    break
                if spy is not None:
                    spy.poll(target_pid())
                if self.signals.count:
                    ended_by = "interrupted"
                    terminate(proc, hurry, self._interrupt_signal(child))
                    break
                if spec.timeout_s is not None and time.monotonic() - started > spec.timeout_s:
                    ended_by = "timeout"
                    terminate(proc, hurry)
                    break
                if stall.check(proc.pid):  # the whole launched tree: under nsys, nsys writing its report is progress
                    ended_by = "stalled"
                    self.console.print(f"[red]no progress for {spec.stall_s:g} s:[/red] ending the run as stalled")
                    dump_stacks(folder, proc.pid)
                    terminate(proc, hurry)
                    break
                time.sleep(POLL_S)
        except KeyboardInterrupt:  # raised by code of ours, not by a signal (the handlers only count)
            ended_by = "interrupted"
            terminate(proc, hurry, self._interrupt_signal(child))
        finally:
            if ended_by is None and rank_launch.running(procs):  # an error of ours broke the loop: still ended
                terminate(proc, hurry)
            for p in procs:
                p.wait()
            end_group(proc.pid)  # loader processes outlive a worker that died by itself
            for pump in pumps:  # a process that left the group may still hold the pipes: swept below
                pump.join(timeout=PUMP_GRACE_S)
            stop_lifeguard(guard)
            shutil.rmtree(tmp_dir, ignore_errors=True)
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
                if pump.error:
                    self.console.print(f"[yellow]output:[/yellow] {pump.error} (all of it reached the terminal)")
        if ended_by is None and self.signals.count:
            # the signal reached the worker's group too (Slurm's scancel signals every process of the job,
            # a terminal's Ctrl-C the foreground group): the worker may be gone before the loop saw the count
            ended_by = "interrupted"
        self.cost = measurement_cost(sampling, children_before, time.monotonic() - started)
        if tegra is not None and (tegra.error or tegra.warnings):
            self.console.print(f"[yellow]tegrastats:[/yellow] {escape(tegra.error or tegra.warnings[0])}")
        failed_code = procs[failed_rank].returncode if failed_rank is not None else None
        self.ended_by = ended_by
        return Ended(proc.returncode, ended_by, sampling, sampler.error, failed_rank, failed_code)

    def _interrupt_signal(self, child: Child) -> int:
        """What an interrupted tracer sends the child first: the child's own choice, or the signal it got."""
        return self.signals.last if child.interrupt_signal is None else child.interrupt_signal

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


def reserve(folder: RunFolder) -> None:
    """Space held back for the final run.json: a disk that fills during the run still gets its cause."""
    with (folder.raw_dir / RESERVE_FILE).open("wb") as f:
        f.write(b"\0" * RESERVE_BYTES)
        f.flush()
        os.fsync(f.fileno())


def disk_full(folder: RunFolder, outcome: Outcome) -> str:
    """'disk full ...' when the run's file system ran out of space during the run (else '')."""
    try:
        free = shutil.disk_usage(folder.path).free
    except OSError:
        return ""
    said = f"{outcome.cause} {' '.join(outcome.stderr_tail)}"
    if free >= RESERVE_BYTES and "No space left" not in said and "Errno 28" not in said:
        return ""
    return f"disk full: {free // 1024} KiB free under {folder.path.parent}; what was written before is kept"
