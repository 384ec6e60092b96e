"""One run folder on disk: where each file lives, and how it is written so that a crash leaves it readable.

`run.json` is replaced atomically (write, fsync, rename); events and samples are append-only text streams
flushed as they come, and turned into Parquet when the run ends. Readers prefer Parquet and fall back to
the streams, so a folder whose tracer died mid-run still loads.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tracer.errors import UserError
from tracer.records import EpochRecord, RunRecord
from tracer.worker.reporting import STEP_COLUMNS as STEP_COLUMNS  # the per-step table, declared by the worker
from tracer.worker.reporting import STEPS_TABLE

RUN_JSON = "run.json"
EVENTS = "events.jsonl"
WORKER_PID = "worker.pid"
WORKER_CONFIG = "worker_config.json"
WORKER_LOG = "raw/worker.log"
SAMPLE_TABLES = ("process", "threads", "gpu", "cores", STEPS_TABLE)


def write_json_atomic(path: Path, data: Any) -> None:
    """Readers never see a half-written file: the old one stays until the new one is complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Yields every complete line; a last line cut short by a crash is skipped."""
    if not path.exists():
        return
    with path.open() as f:
        for line in f:
            if not line.endswith("\n"):
                return
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


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
        self._file.write(buf.getvalue())
        self._file.flush()

    def close(self) -> None:
        self.flush()
        self._file.close()


@dataclass(frozen=True)
class RunFolder:
    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def run_json(self) -> Path:
        return self.path / RUN_JSON

    @property
    def events_path(self) -> Path:
        return self.path / EVENTS

    @property
    def raw_dir(self) -> Path:
        return self.path / "raw"

    @property
    def samples_dir(self) -> Path:
        return self.path / "samples"

    @property
    def worker_pid_path(self) -> Path:
        return self.path / WORKER_PID

    @property
    def worker_config_path(self) -> Path:
        return self.path / WORKER_CONFIG

    @property
    def worker_log(self) -> Path:
        return self.path / WORKER_LOG

    def table_path(self, name: str) -> Path:
        """Normalised trace tables (cuda_api, kernels, memcpy, threads ...) live at the top as Parquet."""
        return self.path / f"{name}.parquet"

    @classmethod
    def create(cls, out_dir: Path, run_id: str) -> RunFolder:
        path = out_dir / run_id
        (path / "raw").mkdir(parents=True, exist_ok=False)
        (path / "samples").mkdir()
        return cls(path)

    def write_record(self, record: RunRecord) -> None:
        write_json_atomic(self.run_json, record.to_json())

    def read_record(self) -> RunRecord:
        try:
            data = json.loads(self.run_json.read_text())
        except FileNotFoundError:
            raise UserError(f"{self.path} is not a run folder: it has no {RUN_JSON}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise UserError(f"{self.run_json} is unreadable ({e}); the run folder is damaged") from None
        return RunRecord.from_json(data)

    def events(self) -> list[dict[str, Any]]:
        return list(read_jsonl(self.events_path))

    def epochs(self) -> list[EpochRecord]:
        return epochs_from_events(self.events())

    def sample_stream_path(self, name: str) -> Path:
        return self.samples_dir / f"{name}.csv"

    def sample_parquet_path(self, name: str) -> Path:
        return self.samples_dir / f"{name}.parquet"

    def samples(self, name: str) -> pa.Table | None:
        """One sample table, from Parquet when the run was finalised, else from its CSV stream."""
        parquet = self.sample_parquet_path(name)
        if parquet.exists():
            return pq.read_table(parquet)
        stream = self.sample_stream_path(name)
        if not stream.exists():
            return None
        return read_csv_stream(stream)

    def finalise_samples(self) -> None:
        """Turn each CSV stream into Parquet; the CSV is removed only once the Parquet is in place."""
        for name in SAMPLE_TABLES:
            stream = self.sample_stream_path(name)
            if not stream.exists():
                continue
            table = read_csv_stream(stream)
            tmp = self.sample_parquet_path(name).with_suffix(".parquet.tmp")
            pq.write_table(table, tmp)
            os.replace(tmp, self.sample_parquet_path(name))
            stream.unlink()


def read_csv_stream(path: Path) -> pa.Table:
    """Reads a sample stream; a last line cut short by a crash is dropped rather than failing the read."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
    opts = pacsv.ConvertOptions(strings_can_be_null=False)
    return pacsv.read_csv(pa.BufferReader(data), convert_options=opts)


def epochs_from_events(events: Sequence[dict[str, Any]]) -> list[EpochRecord]:
    starts = {e["epoch"]: e for e in events if e.get("kind") == "epoch_start"}
    out = []
    for e in events:
        if e.get("kind") != "epoch_end":
            continue
        start = starts.get(e["epoch"])
        if start is None:
            continue
        out.append(
            EpochRecord(
                epoch=int(e["epoch"]),
                start_ns=int(start["t_ns"]),
                end_ns=int(e["t_ns"]),
                images=int(e["images"]),
                loss=float(e["loss"]),
            )
        )
    return out


def list_runs(out_dir: Path) -> list[RunFolder]:
    if not out_dir.is_dir():
        return []
    return sorted((RunFolder(p) for p in out_dir.iterdir() if (p / RUN_JSON).exists()), key=lambda r: r.run_id)


def find_run(out_dir: Path, ref: str) -> RunFolder:
    """A run by path, exact id, or unique id prefix/substring."""
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
        raise UserError(f"no run '{ref}' in {out_dir}: `tracer runs --out {out_dir}` lists the runs there")
    raise UserError(f"'{ref}' matches {len(matches)} runs in {out_dir}; give more of the run id")
