"""Runs one training of the built-in worker in a child process under the sampler and leaves a complete
run folder, however the training ends (finished, raised, crashed, killed, timed out, Ctrl-C)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from tracer.core import window
from tracer.core.cases import make_run_id
from tracer.core.errors import UserError
from tracer.core.options import worker_config
from tracer.core.records import (
    DatasetInfo,
    ModelFacts,
    Outcome,
    RunRecord,
    RunSpec,
    RunStatus,
)
from tracer.core.runfolder import RunFolder
from tracer.core.schema import DATA_FILES, DATA_MEMORY, KIND, TRACER_PID_ENV, Event
from tracer.measure.dataset import check_memory_fits
from tracer.measure.environments import EnvStatus
from tracer.measure.nvml import Nvml
from tracer.measure.outcome import classify, rank_failed
from tracer.measure.process import Child, worker_pythonpath
from tracer.measure.progress import ProgressView
from tracer.measure.supervisor import Supervisor
from tracer.measure.tracing.base import TraceBackend
from tracer.measure.tracing.pyspy import find_pyspy


@dataclass(frozen=True)
class Launch:
    """What the runner needs besides the spec: the interpreter, the dataset folder, where to write."""

    spec: RunSpec
    python: EnvStatus
    dataset_dir: Path
    out_dir: Path
    backend: TraceBackend  # built and given its cheap checks once, by whoever launches


class Runner(Supervisor):
    def __init__(self, launch: Launch, console: Console | None = None) -> None:
        super().__init__(launch.backend, console)
        self.launch = launch

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
        record = RunRecord.built_in(
            make_run_id(spec),
            spec,
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
        outcome = classify(returncode, ended.ended_by, events, folder, spec, self.signals.last)
        if ended.failed_rank is not None:
            outcome = rank_failed(ended.failed_rank, ended.rank_returncode or 0, folder, spec)
        return self._with_sampler_error(outcome, ended), ended.sampling, events


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
