"""Real runs for the report tests: a tiny PyTorch run, a failed one (another batch, so its own row),
and the real nsys / Kineto fixtures brought in through `tracer import`; and one report on all."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import edit_spec, run_tracer
from tracer.core.runfolder import RunFolder, list_runs

IMPORTS = ("nsys-h100/resnet18_train_nsys2025.3.1.sqlite", "kineto-h100/resnet50_bs100_train_torch2.11.json.gz")


@dataclass(frozen=True)
class ReportRuns:
    ok: Path
    failed: Path
    imported: tuple[Path, ...]
    root: Path  # a folder of runs holding copies of all of them


@pytest.fixture(scope="session")
def failed_run(make_run: Callable[..., RunFolder]) -> RunFolder:
    return make_run("pytorch", "--batch", "2", "--limit", "4", "--inject-fault", "raise@1", expect_ok=False)


@pytest.fixture(scope="session")
def imported_runs(tmp_path_factory: pytest.TempPathFactory, real_fixtures: Path) -> tuple[Path, ...]:
    out = tmp_path_factory.mktemp("imported")
    for rel in IMPORTS:
        result = run_tracer("import", str(real_fixtures / rel), "--out", str(out))
        assert result.returncode == 0, result.stderr[-2000:]
    return tuple(f.path for f in list_runs(out))


@pytest.fixture(scope="session")
def report_runs(
    tmp_path_factory: pytest.TempPathFactory,
    tiny_pytorch_run: RunFolder,
    failed_run: RunFolder,
    imported_runs: tuple[Path, ...],
) -> ReportRuns:
    root = tmp_path_factory.mktemp("report-runs")
    copies = [shutil.copytree(p, root / p.name) for p in (tiny_pytorch_run.path, failed_run.path, *imported_runs)]
    return ReportRuns(copies[0], copies[1], tuple(copies[2:]), root)


@pytest.fixture(scope="session")
def report_dir(tmp_path_factory: pytest.TempPathFactory, report_runs: ReportRuns) -> Path:
    """`tracer report` on the folder of runs, with PDF, as a user runs it."""
    out = tmp_path_factory.mktemp("report") / "out"
    result = run_tracer("report", str(report_runs.root), "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def set_spec(run: Path, **changes: object) -> None:
    """Edits a copied run's spec (tests only: e.g. to stand an imported trace in for a named framework)."""
    data = json.loads((run / "run.json").read_text())
    edit_spec(data, **changes)
    (run / "run.json").write_text(json.dumps(data))
