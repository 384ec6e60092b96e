"""One trace-file stem rule (`analyzers.ingest.readers.stem`, from the registered formats' suffixes): an export
and the report it came from are paired by it everywhere (the ingest, an import's run id and label, the cache of
analysed files), dots in the name included: `run_nsys2024.6.nsys-rep` and `run_nsys2024.6.sqlite` are one trace."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from analyzers.ingest import readers
from analyzers.ingest.nsys_report import sibling_export
from analyzers.ingest.pipeline import run_traces
from tracer.core.runfolder import RunFolder

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("run_nsys2024.6.nsys-rep", "run_nsys2024.6"),
        ("run_nsys2024.6.sqlite", "run_nsys2024.6"),
        ("run_nsys2024.6.arrow", "run_nsys2024.6"),
        ("w0.1623.pt.trace.json.gz", "w0.1623"),
        ("trace.json", "trace"),
        (".sqlite", ".sqlite"),  # nothing but a suffix: kept whole
    ],
)
def test_stem(name: str, stem: str) -> None:
    assert readers.stem(name) == stem


def test_an_export_shadows_its_report_and_is_found_beside_it(tmp_path: Path, real_fixtures: Path) -> None:
    raw = tmp_path / "run" / "raw"
    raw.mkdir(parents=True)
    report, export = raw / "run_nsys2024.6.nsys-rep", raw / "run_nsys2024.6.sqlite"
    other = raw / "run_nsys2024.7.nsys-rep"  # another trace: its name shares the part before its first dot
    report.write_bytes(b"")
    shutil.copyfile(real_fixtures / "nsys-ai" / "mock.sqlite", export)  # a real export: files are told by content
    other.write_bytes(b"")
    assert run_traces(RunFolder(tmp_path / "run")) == [export, other]
    assert sibling_export(report) == export and sibling_export(other) is None


def test_no_second_stem_rule() -> None:
    """Where trace files are named (the ingest, the import, the run labels), no name is cut at its first dot."""
    cut = re.compile(r"""\.split\(\s*["']\.["']\s*\)\s*\[\s*0\s*\]|(?<!\breaders)\.stem\b""")
    places = [*(ROOT / "analyzers" / "ingest").glob("*.py"), ROOT / "analyzers" / "render" / "facts.py"]
    places += [ROOT / "tracer" / "cli" / "import_trace.py"]
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in places
             for n, line in enumerate(p.read_text().splitlines(), 1) if cut.search(line)]  # fmt: skip
    assert not found, "name trace files by analyzers.ingest.readers.stem:\n" + "\n".join(found)
