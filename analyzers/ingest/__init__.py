"""Ingest foreign traces into a run folder's normalised tables (`analyzers.tables`).

`ingest_file` reads one trace (nsys .sqlite, .nsys-rep when an `nsys` binary is found, Kineto
.json/.json.gz, or a `raw/cupti/` folder of our CUPTI batches) and writes `<run>/<table>.parquet`
for each table it has; `ingest_run` does it for every known trace under `raw/`. Anything that is
not a readable trace raises `UserError` with one line. Inputs are only ever opened read-only.
When several sources in one run give the same table, their rows are appended, each row carrying
its `source`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers import tables as t
from analyzers.clock import Clock
from tracer.errors import UserError
from tracer.runfolder import RunFolder, write_json_atomic

SQLITE_MAGIC = b"SQLite format 3\x00"


def trace_kind(path: Path) -> str | None:
    """'nsys-sqlite', 'nsys-rep', 'kineto', 'cupti' or None, by name and then by content."""
    if path.is_dir():
        return "cupti" if path.name == "cupti" else None
    name = path.name.lower()
    if name.endswith(".nsys-rep") or name.endswith(".qdrep"):
        return "nsys-rep"
    if name.endswith((".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")):
        return "kineto"
    if name.endswith((".sqlite", ".sqlite3", ".db")):
        return "nsys-sqlite"
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError:
        return None
    if head == SQLITE_MAGIC:
        return "nsys-sqlite"
    if head[:2] == b"\x1f\x8b" or head.lstrip()[:1] in (b"{", b"["):
        return "kineto"
    return None


def find_nsys() -> str | None:
    """nsys on PATH, in $NSYS, or in the usual install folders (the Debian copy the CI installs too)."""
    candidates = [os.environ.get("NSYS", ""), shutil.which("nsys") or ""]
    roots = [Path.home() / ".cache/dl-tracer/nsys", Path("/opt/nvidia"), Path("/usr/local/cuda/bin")]
    for root in roots:
        if root.is_dir():
            candidates += [str(p) for p in sorted(root.glob("**/nsys")) if p.is_file()]
    for c in candidates:
        if c and os.access(c, os.X_OK) and Path(c).is_file():
            return c
    return None


def export_nsys_rep(path: Path, out_sqlite: Path) -> None:
    nsys = find_nsys()
    if nsys is None:
        raise UserError(f"{path}: reading a .nsys-rep needs Nsight Systems (`nsys`), and none was found")
    proc = subprocess.run(
        [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out_sqlite), str(path)],
        capture_output=True,
        text=True,
        errors="replace",  # nsys echoes bytes of a damaged report into its messages
        timeout=1800,
    )
    if proc.returncode != 0 or not out_sqlite.exists():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"{path}: `nsys export` failed ({last})")


def read_trace(path: Path) -> tuple[dict[str, pa.Table], Clock]:
    """The normalised tables of one trace, without writing anything; a trace whose events end before
    they start is refused rather than summed (a negative share would pass for a real one)."""
    tables, clock = _read_trace(path)
    for name, table in tables.items():
        if "dur_ns" in table.column_names and table.num_rows:
            negative = pc.sum(pc.less(table["dur_ns"], 0)).as_py() or 0
            if negative:
                raise UserError(f"{path}: {negative} {name} events end before they start: the trace is damaged")
    return tables, clock


def _read_trace(path: Path) -> tuple[dict[str, pa.Table], Clock]:
    from analyzers.ingest import cupti, kineto, nsys

    kind = trace_kind(path)
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if kind == "nsys-sqlite":
        return nsys.read_sqlite(path)
    if kind == "kineto":
        return kineto.read_json(path)
    if kind == "cupti":
        return cupti.read_dir(path)
    if kind == "nsys-rep":
        with tempfile.TemporaryDirectory(prefix="tracer-nsys-") as tmp:
            out = Path(tmp) / (path.stem + ".sqlite")
            export_nsys_rep(path, out)
            return nsys.read_sqlite(out)
    raise UserError(f"{path}: not a trace this tracer reads (nsys .sqlite/.nsys-rep, Kineto .json[.gz], cupti/)")


def write_tables(folder: RunFolder, tables: dict[str, pa.Table], source: str, clock: Clock) -> list[str]:
    """Writes (or appends to) `<run>/<table>.parquet` atomically and records the clock per source.
    Dictionary-encoded string columns (see `analyzers.tables`) go to the Parquet writer as they are,
    without the Arrow schema in the file, so the file reads back with the declared plain-string schema."""
    written = []
    for name, table in tables.items():
        path = folder.table_path(name)
        if path.exists():
            old = pq.read_table(path)
            table = t.plain(table, old.schema)
            table = pa.concat_tables([old.filter(pa.compute.not_equal(old["source"], source)), table])
            table = table.sort_by("start_ns")
        tmp = path.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp, store_schema=not t.has_dictionaries(table))
        os.replace(tmp, path)
        written.append(name)
    meta_path = folder.path / t.TRACE_META
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    meta[source] = clock.to_json() | {"tables": sorted(written)}
    write_json_atomic(meta_path, meta)
    return written


def _source_of(path: Path) -> str:
    kind = trace_kind(path)
    return {"nsys-sqlite": "nsys", "nsys-rep": "nsys", "kineto": "kineto", "cupti": "cupti"}.get(kind or "", "other")


def ingest_file(path: Path, folder: RunFolder) -> list[str]:
    """Reads one trace and writes its tables into the run folder; returns the table names written."""
    tables, clock = read_trace(Path(path))
    return write_tables(folder, tables, _source_of(Path(path)), clock)


def run_traces(folder: RunFolder) -> list[Path]:
    """The traces under raw/ worth ingesting: a .sqlite wins over the .nsys-rep it was exported from."""
    raw = folder.raw_dir
    if not raw.is_dir():
        return []
    found = [p for p in sorted(raw.iterdir()) if trace_kind(p) in ("nsys-sqlite", "nsys-rep", "kineto", "cupti")]
    found = [p for p in found if not p.name.startswith("pyspy")]
    sqlite_stems = {p.name.split(".")[0] for p in found if trace_kind(p) == "nsys-sqlite"}
    return [p for p in found if not (trace_kind(p) == "nsys-rep" and p.name.split(".")[0] in sqlite_stems)]


def ingest_run(folder: RunFolder) -> list[str]:
    """Ingests every known trace under raw/; returns the distinct table names written."""
    written: list[str] = []
    for path in run_traces(folder):
        for name in ingest_file(path, folder):
            if name not in written:
                written.append(name)
    return written
