"""One run folder on disk: where each file lives, and how it is written so that a crash leaves it readable.

`run.json` is replaced atomically (write, fsync, rename); events and samples are append-only text streams
flushed as they come; the sampler's tables also go out as Parquet row groups as they come
(`SampleStream`: `<table>.parquet.partial`, renamed when the run ends), the other streams are turned
into Parquet when the run ends. Readers prefer Parquet and fall back to
the streams, so a folder whose tracer died mid-run still loads.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import struct
import tempfile
import time
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tracer.core import arrow_build
from tracer.core.divergence import diverged_outcome, divergence, loss_value
from tracer.core.errors import UserError
from tracer.core.problems import Problem, Problems
from tracer.core.reading import not_regular, read_bytes
from tracer.core.reading import parquet as read_parquet
from tracer.core.records import EpochRecord, RunRecord, RunStatus, validate_record
from tracer.core.schema import (
    EVENTS_FILE,
    KIND,
    NONFINITE,
    PARTIAL,
    RUN_JSON,
    SAMPLE_TABLES,
    SAMPLES_DIR,
    T_NS,
    WORKER_CONFIG_FILE,
    WORKER_LOG,
    WORKER_PID_FILE,
    Event,
    strict_json,
)

INT64_MAX = 2**63 - 1
PARTIAL_SUFFIX = ".partial"  # a sample table's Parquet while its stream is still writing row groups
# Text that only an events file with a non-finite loss (or a `diverged` event) holds.
NONFINITE_MARKS = (b"NaN", b"Infinity", b'"' + NONFINITE.encode() + b'"', b'"' + Event.DIVERGED.encode() + b'"')


def write_json_atomic(path: Path, data: Any) -> None:
    """Readers never see a half-written file: the old one stays until the new one is complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(strict_json(data), f, indent=2, sort_keys=False, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_jsonl(path: Path, problems: Problems | None = None) -> Iterator[dict[str, Any]]:
    """Yields every complete line that is a JSON object; a last line cut short by a crash is skipped,
    and so is a line that is not UTF-8 or not JSON (the file is named in `problems`, where given). No
    regular file (a FIFO would block for ever) is a problem too, found from its stat, never opened."""
    problems = problems if problems is not None else Problems()
    why = not_regular(path)
    if why is not None:
        problems.add(path, why)
        return
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return
    except OSError as e:
        problems.add(path, e.strerror or type(e).__name__)
        return
    with f:
        for raw in f:
            if not raw.endswith(b"\n"):
                return
            try:
                item = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                problems.add(path, "not UTF-8")
                continue
            except RecursionError:
                problems.add(path, "a line nested too deeply to read")
                continue
            except json.JSONDecodeError:
                continue
            if isinstance(item, dict):
                yield item


class CsvStream:
    """Append-only CSV whose rows reach the disk at least every `flush_s` seconds, as whole lines."""

    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        self.path = path
        self.columns = list(columns)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", newline="")
        if self._file.tell() == 0:
            self._file.write(",".join(self.columns) + "\n")
            self._file.flush()
        self._pending: list[Sequence[Any]] = []

    def append(self, row: Sequence[Any]) -> None:
        self._pending.append(row)

    def flush(self) -> None:
        if not self._pending:
            return
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(self._pending)
        self._pending.clear()
        text = buf.getvalue()
        self._file.write(text)
        self._file.flush()
        self._wrote(text)

    def _wrote(self, text: str) -> None:
        """The lines that just reached the file (a SampleStream parses them into its next row group)."""

    def close(self) -> None:
        try:
            self.flush()
        finally:
            try:
                self._file.close()
            except OSError:  # the flush above already failed for the same reason (a full disk)
                pass


ROW_GROUP_S = 60.0
"""A sample stream's rows go to its Parquet file as one row group at least this often..."""
ROW_GROUP_MAX_ROWS = 131_072
"""... or once this many rows are waiting (a fast rate on a many-threaded worker), whichever comes first."""


class SampleStream(CsvStream):
    """A sample table written as it comes, twice: the CSV journal (whole lines every flush, what a
    crash leaves readable and what live readers tail) and Parquet row groups appended to
    `<table>.parquet.partial`, renamed to `<table>.parquet` when the stream closes. So the tracer
    holds at most one row group of rows (ROW_GROUP_S or ROW_GROUP_MAX_ROWS) however long the run,
    and the run's end needs no CSV conversion (`RunFolder.finalise_samples` then only drops the journal).
    Rows that Arrow cannot take in the declared types stop the Parquet side only; the journal is then
    converted at the end, as before."""

    def __init__(self, path: Path, schema: pa.Schema, parquet: Path) -> None:
        super().__init__(path, schema.names)
        self.schema = schema
        self.parquet = parquet
        self.partial = parquet.with_name(parquet.name + PARTIAL_SUFFIX)
        self.partial.unlink(missing_ok=True)
        self.parquet_error: str | None = None
        self._writer: pq.ParquetWriter | None = None
        self._batches: list[pa.RecordBatch] = []
        self._rows = 0
        self._group_started = time.monotonic()

    def flush(self) -> None:
        super().flush()
        full = self._rows >= ROW_GROUP_MAX_ROWS
        if self._rows and (full or time.monotonic() - self._group_started >= ROW_GROUP_S):
            self._write_group()

    def _wrote(self, text: str) -> None:
        """The journal's new lines, parsed as `read_csv_stream` parses the journal (Arrow's CSV reader:
        no Python object per value, and the Parquet holds exactly what the CSV holds)."""
        if self.parquet_error is not None:
            return
        try:
            table = pacsv.read_csv(
                pa.BufferReader(text.encode()),
                read_options=pacsv.ReadOptions(column_names=self.schema.names),
                convert_options=_convert_options(self.schema),
            )
            self._batches += table.to_batches()
            self._rows += table.num_rows
        except (pa.ArrowException, ValueError) as e:
            self._give_up_parquet(e)

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.parquet_error is None:
                try:
                    self._write_group()
                    if self._writer is not None:
                        self._writer.close()
                        self._writer = None
                        os.replace(self.partial, self.parquet)
                except (pa.ArrowException, OSError) as e:
                    self._give_up_parquet(e)

    def _write_group(self) -> None:
        """The waiting rows as one row group (the file is opened on the first, so a stream that never
        had a row still closes into a typed, empty table)."""
        if self.parquet_error is not None:
            return
        try:
            if self._writer is None:
                self._writer = pq.ParquetWriter(self.partial, self.schema)
            if self._batches:
                table = pa.Table.from_batches(self._batches, schema=self.schema)
                self._writer.write_table(table, row_group_size=table.num_rows)
        except (pa.ArrowException, OSError) as e:
            self._give_up_parquet(e)
        self._batches.clear()
        self._rows = 0
        self._group_started = time.monotonic()

    def _give_up_parquet(self, e: BaseException) -> None:
        self.parquet_error = f"{type(e).__name__}: {e}"
        self._batches.clear()
        self._rows = 0
        if self._writer is not None:
            try:
                self._writer.close()
            except (pa.ArrowException, OSError):
                pass
            self._writer = None
        self.partial.unlink(missing_ok=True)


@dataclass(frozen=True)
class RunFolder:
    path: Path
    problems: Problems = dataclass_field(default_factory=Problems, compare=False, repr=False)  # damaged files met

    @property
    def run_id(self) -> str:
        """A run's one identity for every consumer: its folder's name. run.json's `run_id` is what the run
        was made as; a folder renamed or copied under another name is known by its new name."""
        return self.path.name

    @property
    def run_json(self) -> Path:
        return self.path / RUN_JSON

    @property
    def events_path(self) -> Path:
        return self.path / EVENTS_FILE

    @property
    def raw_dir(self) -> Path:
        return self.path / "raw"

    @property
    def samples_dir(self) -> Path:
        return self.path / SAMPLES_DIR

    @property
    def worker_pid_path(self) -> Path:
        return self.path / WORKER_PID_FILE

    @property
    def worker_config_path(self) -> Path:
        return self.path / WORKER_CONFIG_FILE

    @property
    def worker_log(self) -> Path:
        return self.path / WORKER_LOG

    def table_path(self, name: str) -> Path:
        """Normalised trace tables (cuda_api, kernels, memcpy, threads ...) live at the top as Parquet."""
        return self.path / f"{name}.parquet"

    def table_file(self, name: str) -> Path | pa.Buffer:
        """What a reader opens to read trace table `name` (a Parquet file; where it is present, as
        `table_path` says): here its file; one rank's view of a run (`analyzers.run.rank_view`) gives that
        rank's rows, as Parquet in memory."""
        return self.table_path(name)

    @classmethod
    def create(cls, out_dir: Path, run_id: str) -> RunFolder:
        path = out_dir / run_id
        (path / "raw").mkdir(parents=True, exist_ok=False)
        (path / SAMPLES_DIR).mkdir()
        return cls(path)

    def write_record(self, record: RunRecord) -> None:
        write_json_atomic(self.run_json, record.to_json())

    def read_record(self) -> RunRecord:
        raw = read_bytes(self.run_json)
        if raw is None:
            raise UserError(f"{self.path} is not a run folder: it has no {RUN_JSON}")
        if isinstance(raw, Problem):
            raise UserError(f"{self.run_json} is unreadable ({raw.what}); the run folder is damaged")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            raise UserError(f"{self.run_json} is unreadable ({e}); the run folder is damaged") from None
        why = validate_record(data)
        if isinstance(why, str):
            raise UserError(f"{self.run_json} does not match the run format ({why}); the run is damaged")
        return self._with_divergence(why)

    def _with_divergence(self, record: RunRecord) -> RunRecord:
        """A run that says `ok` but whose events hold a non-finite loss (written before the worker
        checked) is read as `diverged`; the events are parsed only when their text can hold one."""
        if record.outcome.status is not RunStatus.OK or record.outcome.divergence is not None:
            return record
        if not_regular(self.events_path):
            return record
        try:
            text = self.events_path.read_bytes()
        except OSError:
            return record
        if not any(mark in text for mark in NONFINITE_MARKS):
            return record
        found = divergence(self.events(), record.spec.lr if record.spec else None)
        return dataclasses.replace(record, outcome=diverged_outcome(record.outcome, found))

    def events(self) -> list[dict[str, Any]]:
        """Every event whose kind is a string and whose time is an int64 of ns; the first line that is
        not is named once (a damaged line never reaches a reader)."""
        kept = []
        for event in read_jsonl(self.events_path, self.problems):
            why = event_problem(event)
            if why:
                self.problems.add(self.events_path, why)
                continue
            kept.append(event)
        return kept

    def epochs(self) -> list[EpochRecord]:
        return epochs_from_events(self.events())

    def sample_stream_path(self, name: str) -> Path:
        return self.samples_dir / f"{name}.csv"

    def sample_parquet_path(self, name: str) -> Path:
        return self.samples_dir / f"{name}.parquet"

    def samples(self, name: str) -> pa.Table | None:
        """One sample table, from Parquet when the run was finalised, else from its CSV stream."""
        parquet = self.sample_parquet_path(name)
        path = parquet if parquet.exists() else self.sample_stream_path(name)
        if not path.exists():
            return None
        declared = SAMPLE_TABLES[name].schema if name in SAMPLE_TABLES else None
        why = not_regular(path)
        if why is not None:
            self.problems.add(path, why)
            return None
        try:
            table = read_parquet(parquet) if path == parquet else read_csv_stream(path, declared)
            return conform(table, declared, SAMPLE_TABLES[name].defaults) if declared is not None else table
        except (pa.ArrowException, OSError, ValueError) as e:
            self.problems.add(path, str(e).splitlines()[0] if str(e) else type(e).__name__)
            return None

    def _written_by_stream(self, name: str) -> bool:
        """Whether a SampleStream closed cleanly into `<name>.parquet` (it is renamed into place only then)."""
        parquet = self.sample_parquet_path(name)
        try:
            return parquet.exists() and pq.ParquetFile(parquet).metadata is not None
        except (pa.ArrowException, OSError):
            return False

    def sample_stream(self, name: str) -> SampleStream:
        """The writer of one sample table (CSV journal and Parquet row groups, see SampleStream)."""
        return SampleStream(self.sample_stream_path(name), SAMPLE_TABLES[name].schema, self.sample_parquet_path(name))

    def finalise_samples(self) -> list[str]:
        """Turn each CSV stream into Parquet; the CSV is removed only once the Parquet is in place.
        A table its SampleStream already wrote as Parquet only loses its journal. Returns what could
        not be converted (a full disk): those streams stay as CSV, still readable."""
        problems: list[str] = []
        for name in SAMPLE_TABLES:
            stream = self.sample_stream_path(name)
            if not stream.exists():
                continue
            if self._written_by_stream(name):
                stream.unlink()
                continue
            tmp = self.sample_parquet_path(name).with_suffix(".parquet.tmp")
            try:
                declared = SAMPLE_TABLES[name].schema
                table = conform(read_csv_stream(stream, declared), declared, SAMPLE_TABLES[name].defaults)
                pq.write_table(table, tmp)
                os.replace(tmp, self.sample_parquet_path(name))
            except (pa.ArrowException, OSError, ValueError) as e:  # a full disk: the CSV stream stays
                tmp.unlink(missing_ok=True)
                problems.append(f"{stream.name} kept as CSV ({type(e).__name__}: {e})")
                continue
            stream.unlink()
        return problems


def read_csv_stream(path: Path, declared: pa.Schema | None = None) -> pa.Table:
    """Reads a sample stream; a last line cut short by a crash is dropped rather than failing the read.
    With `declared`, its columns are read in their declared types: a stream with no row yet (a run
    ended before its first sample) still has typed columns, never null-typed ones."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
    return pacsv.read_csv(pa.BufferReader(data), convert_options=_convert_options(declared))


def _convert_options(declared: pa.Schema | None) -> pacsv.ConvertOptions:
    types = {f.name: f.type for f in declared} if declared is not None else None
    return pacsv.ConvertOptions(strings_can_be_null=False, column_types=types)


def conform(table: pa.Table, declared: pa.Schema, defaults: Mapping[str, Any] | None = None) -> pa.Table:
    """`table` with every declared column in its declared type (a column an older writer did not have
    reads as its value in `defaults`, else as nulls; extra columns are kept). A ValueError names the first
    column that cannot be: a missing time column, or values of another kind (text where numbers belong)."""
    if T_NS in declared.names and T_NS not in table.column_names:
        raise ValueError(f"no {T_NS} column (columns: {', '.join(table.column_names[:6]) or 'none'})")
    for field in declared:
        if field.name not in table.column_names:
            if defaults and field.name in defaults:
                filler = arrow_build.filled(defaults[field.name], table.num_rows, field.type)
            else:
                filler = pa.nulls(table.num_rows, field.type)
            table = table.append_column(field, filler)
            continue
        column = table.column(field.name)
        if column.type == field.type:
            continue
        try:
            cast = column.cast(field.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise ValueError(f"column {field.name} holds {column.type}, not {field.type}") from None
        table = table.set_column(table.schema.get_field_index(field.name), field, cast)
    return _impossible_as_null(table, declared)


NON_NEGATIVE_SUFFIXES = ("_pct", "_mib", "_cores", "_w", "_s", "_mj", "_uj")
"""Sample columns whose unit has no negative values (a share, a size, a power, a time, an energy)."""


def _impossible_as_null(table: pa.Table, declared: pa.Schema) -> pa.Table:
    """A float column's impossible values in a unit that has none (NaN, infinities, a negative size or share) as
    missing: a damaged or foreign table never shows CPU % inf or an RSS of -1e300 MiB."""
    import pyarrow.compute as pc

    # scalars made from buffers: a Python 0 or None in a compute call makes pyarrow probe for pandas, and the
    # probe imports it (0.5-1 s of every viewer open)
    zero = pa.Array.from_buffers(pa.float64(), 1, [None, pa.py_buffer(struct.pack("d", 0.0))])[0]
    for field in declared:
        if not pa.types.is_floating(field.type) or not field.name.endswith(NON_NEGATIVE_SUFFIXES):
            continue
        column = table.column(field.name)
        bad = pc.or_(pc.invert(pc.is_finite(column)), pc.less(column, zero.cast(field.type)))
        if pc.any(bad).as_py():
            fixed = pc.if_else(bad, pa.nulls(1, field.type)[0], column)
            table = table.set_column(table.schema.get_field_index(field.name), field, fixed)
    return table


def event_problem(event: dict[str, Any]) -> str:
    """Why one event cannot be read (its kind is not text, its time is not a whole number of ns that
    fits int64), or ''."""
    if not isinstance(event.get(KIND), str):
        return f"an event whose {KIND} is {event.get(KIND)!r}"
    t = event.get(T_NS)
    if type(t) is not int or not 0 <= t <= INT64_MAX:
        return f"an event whose {T_NS} is {t!r}, not a whole number of ns since 1970"
    return ""


def partial_epochs(events: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    """(epoch, steps) of each epoch the run left before its end (a failure, Ctrl-C): kept apart from
    `epochs_from_events`, so no epoch figure counts it."""
    out = []
    for e in events:
        if e.get(KIND) == Event.EPOCH_END and e.get(PARTIAL) is True:
            try:
                out.append((int(e["epoch"]), int(e.get("steps") or 0)))
            except (KeyError, TypeError, ValueError):
                continue
    return out


def epochs_from_events(events: Sequence[dict[str, Any]]) -> list[EpochRecord]:
    """Epochs from start/end pairs; an event missing a field or holding a wrong type is passed over, and so
    is a partial epoch (`partial_epochs`)."""
    starts = {e.get("epoch"): e for e in events if e.get(KIND) == Event.EPOCH_START}
    out = []
    for e in events:
        if e.get(KIND) != Event.EPOCH_END or e.get(PARTIAL) is True:
            continue
        start = starts.get(e.get("epoch"))
        if start is None:
            continue
        try:
            loss = loss_value(e)
            accuracy, peak = e.get("accuracy"), e.get("device_peak_mib")
            epoch = EpochRecord(
                epoch=int(e["epoch"]),
                start_ns=int(start["t_ns"]),
                end_ns=int(e["t_ns"]),
                images=int(e["images"]),
                loss=float("nan") if loss is None else loss,
                accuracy=None if accuracy is None else float(accuracy),
                device_peak_mib=None if peak is None else float(peak),
                device_peak_source=str(e.get("device_peak_source") or ""),
            )
        except (KeyError, TypeError, ValueError):
            continue
        if epoch.end_ns < epoch.start_ns or epoch.images < 0:  # impossible: never a (negative) epoch time
            continue
        out.append(epoch)
    return out


def list_runs(out_dir: Path) -> list[RunFolder]:
    """The run folders in `out_dir`: each folder holding a run.json, a damaged one too (a link round a loop
    is listed, and read as damaged, not left out); `out_dir` a symlink loop is one line, not "no runs"."""
    from tracer.core.output import resolved

    resolved(out_dir, "the runs folder")
    if not out_dir.is_dir():
        return []
    found = (p for p in out_dir.iterdir() if (p / RUN_JSON).exists() or (p / RUN_JSON).is_symlink())
    return sorted((RunFolder(p) for p in found), key=lambda r: r.run_id)


SHORT_ID_MIN = 4


def short_ids(run_ids: Sequence[str]) -> dict[str, str]:
    """Per id, its shortest tail of whole `-`-separated words (at least SHORT_ID_MIN characters) that no
    other id contains: `85cf` for `20261125-000159-pytorch-alexnet-big-gpu-b100-85cf`. `find_run` takes
    any unique part of an id, so every command that names a run accepts these."""
    out = {}
    for run_id in run_ids:
        words = run_id.split("-")
        for k in range(1, len(words) + 1):
            tail = "-".join(words[-k:])
            if len(tail) >= SHORT_ID_MIN and not any(tail in other for other in run_ids if other != run_id):
                out[run_id] = tail
                break
        else:
            out[run_id] = run_id
    return out


def find_run(out_dir: Path, ref: str) -> RunFolder:
    """A run by path, exact id, or unique id prefix/substring."""
    if not ref.strip() or ref.strip() == "-":
        raise UserError(f"'{ref}' names no run: give a run id (or a unique part of it) or a run folder path")
    as_path = Path(ref)
    if (as_path / RUN_JSON).exists():
        return RunFolder(as_path)
    runs = list_runs(out_dir)
    exact = [r for r in runs if r.run_id == ref]
    if exact:
        return exact[0]
    matches = [r for r in runs if ref in r.run_id]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UserError(f"no run '{ref}' in {out_dir}: `tracer runs --runs {out_dir}` lists the runs there")
    raise UserError(f"'{ref}' matches {len(matches)} runs in {out_dir}; give more of the run id")
