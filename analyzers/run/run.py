"""`Run`: one run folder whose reads are kept. Every consumer (analyze, show, diagnose, compare, runs, the
report, the viewer, the notebook) opens a run here and hands it to the analyses, each a function of a
`Run` (`analyzers.run.memo.per_run` keeps what they compute in the run's memo). A `Run` is a snapshot: a
run still being written is opened again to see what came since.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, TypeVar

from analyzers.run import WARMUP_EPOCHS
from analyzers.run.rank_view import RankOf
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
    import pyarrow as pa

T = TypeVar("T")
IMPORTED = "imported"  # the device of a case made by `tracer import`: what ran where is unknown
READS = ("samples", "table", "file")  # the keys of the tables read, which `Run.release` drops
HOLD_TABLES: set[Callable[..., Any]] = set()
"""The analyses whose results hold the run's tables (`analyzers.run.memo.per_run_holding_tables`): dropped
from the memo with the tables by `Run.release`."""


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
    """One run folder, each part read once. `warmup` is the number of leading epochs the phases, the summary
    and the diagnosis leave out of the steady state; `memo` holds what the analyses computed, keyed by the
    function and the warm-up (`analyzers.run.memo`), shared by the same run opened with another warm-up.
    `rank_of`: where this is one rank's view of a run (`rank`), that rank; None for the whole run."""

    warmup: int = WARMUP_EPOCHS
    rank_of: RankOf | None = field(default=None, repr=False, compare=False)
    memo: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    _reads: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def open(cls, where: Path | str | RunFolder, warmup: int = WARMUP_EPOCHS) -> Run:
        """The run in `where` (a folder path or a `RunFolder`, whose problems it keeps collecting); a `Run`
        with another warm-up: the same run, its reads and memo shared."""
        if isinstance(where, Run):
            return where if where.warmup == warmup else where.with_warmup(warmup)
        if isinstance(where, RunFolder):
            return cls(where.path, where.problems, warmup)
        return cls(Path(where), warmup=warmup)

    def with_warmup(self, warmup: int) -> Run:
        """This run with another warm-up: what was read is shared, what is computed is kept per warm-up."""
        if warmup == self.warmup:
            return self
        other = Run(self.path, self.problems, warmup, self.rank_of)
        object.__setattr__(other, "memo", self.memo)
        object.__setattr__(other, "_reads", self._reads)
        return other

    def _once(self, key: Any, make: Callable[[], T]) -> T:
        if key not in self._reads:
            self._reads[key] = make()
        value: T = self._reads[key]
        return value

    # What was run -------------------------------------------------------------------------------------
    def read_record(self) -> RunRecord:
        """run.json, read once (a damaged one raises `UserError` on every ask, as a folder's does)."""
        if self.rank_of is not None:
            return self.rank_of.whole.read_record()
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
        if self.rank_of is not None:
            return self.rank_of.whole.events()
        return list(self._once("events", super().events))

    def epochs(self) -> list[EpochRecord]:
        if self.rank_of is not None:
            return self.rank_of.whole.epochs()
        return list(self._once("epochs", super().epochs))

    def samples(self, name: str, columns: Iterable[str] | None = None) -> pa.Table | None:
        """A sample table (the steps table too), read once; `columns`: those of them only (where present)."""
        table = self._once(("samples", name), lambda: self._read_samples(name))
        if table is None or columns is None:
            return table
        return table.select([c for c in columns if c in table.column_names])

    def _read_samples(self, name: str) -> pa.Table | None:
        return RunFolder.samples(self, name) if self.rank_of is None else self.rank_of.samples(name)

    @property
    def steps(self) -> pa.Table | None:
        """The per-step rows, or None for a run without them (older runs, runs that never reached a step)."""
        table = self.samples(STEPS_TABLE)
        return table if table is not None and table.num_rows > 0 else None

    def table(self, name: str, columns: Iterable[str] | None = None) -> pa.Table | None:
        """A trace table (`analyzers.trace.tables`: cuda_api, kernels, ...), read once; None where the run has
        none, and where it is damaged (named in `problems`)."""
        wanted = None if columns is None else list(columns)
        return self._once(("table", name, tuple(wanted or ())), lambda: self._read_table(name, wanted))

    def table_file(self, name: str) -> Path | pa.Buffer:
        """What a reader of trace table `name` opens: its file; for one rank's view (`rank`), where the table
        is present, that rank's rows as Parquet in memory, made once."""
        rank_of = self.rank_of
        if rank_of is None or not self.has_table(name):
            return self.table_path(name)
        return self._once(("file", name), lambda: rank_of.table_file(self.table_path(name)))

    def has_table(self, name: str) -> bool:
        """Whether the trace table `name` is there and readable (a damaged one is named in `problems`)."""
        from analyzers.trace import tables

        return self._once(("present", name), lambda: tables.present(self, name))

    def _read_table(self, name: str, columns: list[str] | None) -> pa.Table | None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = self.table_path(name)
        if not self.has_table(name):  # absent, or damaged (its schema checked first; named in problems)
            return None
        try:
            with pq.ParquetFile(self.table_file(name), memory_map=True) as file:
                have = file.schema_arrow.names
                return file.read(columns=None if columns is None else [c for c in columns if c in have])
        except (pa.ArrowException, OSError, ValueError) as e:
            self.problems.add(path, str(e).splitlines()[0] if str(e) else type(e).__name__)
            return None

    @cached_property
    def window(self) -> WindowSpan | None:
        """Where the run's trace window lies (None for a run traced whole): a fact of its trace tables."""
        return window_span(self)

    def rank(self, rank: int) -> Run:
        """This run as rank `rank` alone, in memory (`analyzers.run.rank_view`): its trace tables, steps and
        collectives hold that rank's rows, its samples are the rank's own; the record, events and problems
        are the run's, and what is computed on it is kept in its own memo (the rank's summary, phases ...).
        An unknown rank is a `UserError` naming the run's ranks."""
        whole = self if self.rank_of is None else self.rank_of.whole
        return Run(self.path, self.problems, self.warmup, RankOf.of(whole, rank))

    @property
    def only_rank(self) -> int | None:
        """The rank this run is a view of (`rank`); None for the whole run."""
        return None if self.rank_of is None else self.rank_of.rank

    def release(self) -> None:
        """Drops the tables read so far (sample and trace tables, the analyses that hold them: the
        diagnosis's inputs), keeping what was computed from them (record, epochs, phases, summary, view): a
        consumer of many runs (`tracer runs`, the report, the run browser) holds one run's tables at a time."""
        for key in [k for k in self._reads if isinstance(k, tuple) and k[0] in READS]:
            del self._reads[key]
        for key in [k for k in self.memo if k[0] in HOLD_TABLES]:
            del self.memo[key]

    def problem_list(self) -> list[Problem]:
        """The damaged files met so far, each once (parts not yet asked for have not been read)."""
        return list(self.problems)


def problems_of(runs: Iterable[RunFolder]) -> list[Problem]:
    """The problems of several runs, each file once, in the order of the runs."""
    seen: dict[str, Problem] = {}
    for run in runs:
        for p in run.problems:
            seen.setdefault(p.file, p)
    return list(seen.values())


def _reason(message: str, path: Path) -> str:
    return message.replace(str(path), "").strip(" :") or "unreadable"
