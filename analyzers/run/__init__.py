"""`Run`: one run, read once. Every consumer (analyze, show, diagnose, compare, runs, the report, the
viewer, the notebook) opens a run here and asks it for its parts; each part is read or computed on first
use and kept: the record and what was run (`workload`, `ranks`), the events and epochs, the phases on
the sampler's clock and on the trace's, the steps and samples, the trace tables, the summary, the
diagnosis inputs, the stored view, and `problems` (the damaged files met and skipped, as records).

A `Run` is a `RunFolder` whose reads are cached, so every analyzer written as a function of a folder
takes a `Run` unchanged and reads through its cache; a function given a bare folder turns it into a
`Run` with `as_run` and so computes the same parts the same way. A `Run` is a snapshot: a run still
being written is opened again to see what came since.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import pyarrow as pa

from analyzers.figures import phases as ph
from analyzers.trace.trace_window import WindowSpan, window_span
from tracer.core.cached import cached_property
from tracer.core.cases import CASES, RunKey, dataset_label
from tracer.core.errors import UserError
from tracer.core.problems import Problem
from tracer.core.records import EpochRecord, RankInfo, RunRecord, RunStatus
from tracer.core.runfolder import RunFolder
from tracer.core.schema import STEPS_TABLE
from tracer.core.workload import Known, Workload

if TYPE_CHECKING:
    from analyzers.comparison.pairs import DataPair
    from analyzers.diagnosis.inputs import RunTables
    from analyzers.figures.run_summary import RunSummary
    from analyzers.summaries.rows import ApiRow
    from analyzers.timeline.view_store import RunView

T = TypeVar("T")
IMPORTED = "imported"  # the device of a case made by `tracer import`: what ran where is unknown


@dataclass(frozen=True, order=True)
class CaseKey:
    """What the study compares frameworks on: one model on one dataset, on one device, at one batch size."""

    model: str
    dataset: str
    device: str
    batch: int

    @property
    def imported(self) -> bool:
        return self.device == IMPORTED

    @property
    def name(self) -> str:
        """The study's case name where the model and dataset are one of its cases, else `model/dataset`."""
        for case in CASES.values():
            if (case.model, case.dataset) == (self.model, self.dataset):
                return case.name
        return f"{self.model}/{self.dataset}"

    @property
    def title(self) -> str:
        if self.imported:
            return f"imported trace {self.dataset}"
        what = f"{self.model} on {self.dataset}"
        head = what if self.name == f"{self.model}/{self.dataset}" else f"{self.name} ({what})"
        return f"{head}, {self.device.upper()}, batch {self.batch}"

    @property
    def slug(self) -> str:
        raw = f"{self.name}-{self.device}" + ("" if self.imported else f"-b{self.batch}")
        return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in raw)

    def sort_key(self) -> tuple[int, str, str, int]:
        """The study's cases first, in the study's order (SimpleBig, ComplexSmall), CPU before GPU."""
        names = list(CASES)
        rank = names.index(self.name) if self.name in names else len(names)
        return (rank, self.name, self.device, self.batch)


@dataclass(frozen=True, eq=False)
class Run(RunFolder):
    """One run folder, each part read once (see the module docstring). `warmup` is the number of leading
    epochs the phases, the summary and the diagnosis leave out of the steady state."""

    warmup: int = ph.WARMUP_EPOCHS
    _cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def open(cls, where: Path | str | RunFolder, warmup: int = ph.WARMUP_EPOCHS) -> Run:
        """The run in `where` (a folder path or a `RunFolder`, whose problems it keeps collecting)."""
        if isinstance(where, Run) and where.warmup == warmup:
            return where
        if isinstance(where, RunFolder):
            return cls(where.path, where.problems, warmup)
        return cls(Path(where), warmup=warmup)

    def _once(self, key: Any, make: Callable[[], T]) -> T:
        if key not in self._cache:
            self._cache[key] = make()
        value: T = self._cache[key]
        return value

    @property
    def folder(self) -> Run:
        """The run's folder: the run itself (callers written for a loaded run's `.folder` read through it)."""
        return self

    # What was run -------------------------------------------------------------------------------------
    def read_record(self) -> RunRecord:
        """run.json, read once (a damaged one raises `UserError` on every ask, as a folder's does)."""
        return self._once("record", super().read_record)

    @property
    def record(self) -> RunRecord:
        return self.read_record()

    @cached_property
    def record_or_none(self) -> RunRecord | None:
        """The record, or None where run.json is missing or damaged (named in `problems`)."""
        try:
            return self.read_record()
        except UserError as e:
            self.problems.add(self.run_json, _reason(str(e), self.run_json))
            return None

    @property
    def workload(self) -> Workload:
        """The built-in workload's spec, the user's command, or the imported trace (no made-up defaults)."""
        return self.record.workload

    @property
    def ranks(self) -> tuple[RankInfo, ...]:
        """The run's processes: one rank (0 of 1) for a single process."""
        return self.record.rank_infos

    @property
    def framework(self) -> str:
        return self.record.measurement.framework

    @property
    def ok(self) -> bool:
        return self.record.outcome.status is RunStatus.OK

    @property
    def key(self) -> RunKey:
        """Framework, model, dataset, device, batch: the run's identity (`tracer.core.cases.RunKey`)."""
        known, measured = Known.of(self.record.workload), self.record.measurement
        return RunKey(measured.framework, known.model, dataset_label(known.dataset), measured.device, known.batch or 0)

    @property
    def case(self) -> CaseKey:
        """The key without the framework: what the frameworks are compared on (an import: its own case)."""
        key = self.key
        if self.record.imported is not None:
            return CaseKey(key.model, key.dataset, IMPORTED, 0)
        return CaseKey(key.model, key.dataset, key.device, key.batch)

    # What it reported as it went ----------------------------------------------------------------------
    def events(self) -> list[dict[str, Any]]:
        return list(self._once("events", super().events))

    def epochs(self) -> list[EpochRecord]:
        return list(self._once("epochs", super().epochs))

    def samples(self, name: str) -> pa.Table | None:
        """A sample table (the steps table too), read once."""
        return self._once(("samples", name), lambda: super(Run, self).samples(name))

    @property
    def steps(self) -> pa.Table | None:
        """The per-step rows, or None for a run without them (older runs, runs that never reached a step)."""
        table = self.samples(STEPS_TABLE)
        return table if table is not None and table.num_rows > 0 else None

    def table(self, name: str, columns: list[str] | None = None) -> pa.Table | None:
        """A trace table (`analyzers.trace.tables`: cuda_api, kernels, ...), read once; None where the run has
        none, and where it is damaged (named in `problems`)."""
        return self._once(("table", name, tuple(columns or ())), lambda: self._read_table(name, columns))

    def _read_table(self, name: str, columns: list[str] | None) -> pa.Table | None:
        import pyarrow.parquet as pq

        from analyzers.trace import tables

        path = self.table_path(name)
        if not tables.present(self, name):  # absent, or damaged (its schema checked first; named in problems)
            return None
        try:
            with pq.ParquetFile(path, memory_map=True) as file:
                return file.read(columns=columns)
        except (pa.ArrowException, OSError, ValueError) as e:
            self.problems.add(path, str(e).splitlines()[0] if str(e) else type(e).__name__)
            return None

    # Computed once ------------------------------------------------------------------------------------
    @cached_property
    def phases(self) -> ph.RunPhases:
        """The phases on the sampler's clock (samples, steps, threads), from the worker's epoch events."""
        return ph.run_phases(self, self.warmup)

    @cached_property
    def trace_phases(self) -> ph.RunPhases:
        """The phases on the trace's clock (`analyzers.figures.phases.trace_phases`)."""
        return ph.trace_phases(self, self.warmup)

    @cached_property
    def window(self) -> WindowSpan | None:
        """Where the run's trace window lies (None for a run traced whole)."""
        return window_span(self)

    @cached_property
    def nvtx_ranges(self) -> list[tuple[str, int, int]]:
        return ph.nvtx_ranges(self)

    @cached_property
    def api_family(self) -> str:
        from analyzers.summaries.cuda_api import api_family

        return api_family(self)

    @cached_property
    def api_phases(self) -> dict[str, list[ApiRow]]:
        """The CUDA API split per phase on the trace's clock (`analyzers.summaries.cuda_api.phase_summaries`),
        from the stored view where one is current and the warm-up is the one it was made with."""
        from analyzers.summaries.cuda_api import phase_summaries
        from analyzers.timeline import view_store

        stored = view_store.stored_api_phases(self) if self.warmup == ph.WARMUP_EPOCHS else None
        if stored is not None:
            return {name: [] for name in ph.PHASES} | stored
        return phase_summaries(self, self.warmup)

    @cached_property
    def summary(self) -> RunSummary:
        from analyzers.figures.run_summary import compute_summary

        return compute_summary(self, self.warmup)

    @cached_property
    def pair(self) -> DataPair | None:
        """The runs beside it differing only in --data (`analyzers.comparison.pairs`), if any."""
        from analyzers.comparison.pairs import pair_beside

        return pair_beside(self, self.warmup)

    @cached_property
    def diagnosis_inputs(self) -> RunTables:
        from analyzers.diagnosis.inputs import load

        return load(self)

    @cached_property
    def view(self) -> RunView:
        """What the viewer draws of the trace: stored for a big one (`analyzers.timeline.view_store`)."""
        from analyzers.timeline import view_store

        return view_store.load(self)

    def release(self) -> None:
        """Drops the tables read so far (sample and trace tables, the diagnosis's inputs), keeping what was
        computed from them (record, epochs, phases, summary, view): a consumer of many runs (`tracer runs`,
        the report, the run browser) holds one run's tables at a time, not every run's."""
        for key in [k for k in self._cache if isinstance(k, tuple) and k[0] in ("samples", "table")]:
            del self._cache[key]
        self.__dict__.pop("diagnosis_inputs", None)

    def problem_list(self) -> list[Problem]:
        """The damaged files met so far, each once (parts not yet asked for have not been read)."""
        return list(self.problems)


def as_run(where: RunFolder | Path | str, warmup: int = ph.WARMUP_EPOCHS) -> Run:
    """`where` as a `Run` (itself where it is one with that warm-up), for functions that take either."""
    return Run.open(where, warmup)


def problems_of(runs: Any) -> list[Problem]:
    """The problems of several runs, each file once, in the order of the runs."""
    seen: dict[str, Problem] = {}
    for run in runs:
        for p in run.problems:
            seen.setdefault(p.file, p)
    return list(seen.values())


def _reason(message: str, path: Path) -> str:
    return message.replace(str(path), "").strip(" :") or "unreadable"
