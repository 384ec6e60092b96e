"""`analyzers.run.run.Run`, the one loaded form of a run: its parts are read or computed once, what was run is
the record's typed workload, and a damaged file is a problem record beside the rest of the run, read."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest

from analyzers.diagnosis import inputs
from analyzers.figures import phase_cuts
from analyzers.figures.contention import run_contention
from analyzers.figures.run_summary import summarise
from analyzers.run.run import Run
from analyzers.timeline import view_store
from tracer.cli import main
from tracer.core.problems import Problem
from tracer.core.records import BuiltinWorkload
from tracer.core.runfolder import RunFolder

CF98 = "gpu-h100/20261125-001043-pytorch-alexnet-big-gpu-b100-cf98"  # traced with nsys: NVTX epochs, 2 epochs


@pytest.fixture
def cf98(real_fixtures: Path, tmp_path: Path) -> Path:
    """A writable copy of a real traced H100 run (2 MB)."""
    return Path(shutil.copytree(real_fixtures / CF98, tmp_path / Path(CF98).name))


def _damage(path: Path) -> Path:
    """Random bytes in place of the run's GPU samples: a table that is no Parquet file at all."""
    gpu = path / "samples" / "gpu.parquet"
    gpu.write_bytes(os.urandom(4096))
    return gpu


def _count(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls = [0]
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_analyze_computes_the_phases_once(
    cf98: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    trace_cuts = _count(monkeypatch, phase_cuts, "windowed_phases")  # the first step of every trace cut
    cuts = _count(monkeypatch, phase_cuts, "from_marks")  # every cut at epoch marks, on either clock
    assert main(["analyze", str(cf98), "--phase", "steady", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["covers"] == "steady state (epoch 2)" and data["cuda_api"] and data["kernels"]
    assert trace_cuts[0] == 1
    assert cuts[0] == 2  # once on the trace's clock (NVTX epochs), once on the sampler's (the summary's MFU)


def test_parts_are_read_once_and_kept(cf98: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    real = RunFolder.samples

    def counted(self: RunFolder, name: str) -> Any:
        read.append(name)
        return real(self, name)

    monkeypatch.setattr(RunFolder, "samples", counted)
    run = Run.open(cf98)
    assert summarise(run) is summarise(run)
    assert inputs.load(run).process is run.samples("process")  # the diagnosis reads the same table
    view_store.load(run)  # the viewer's part reads the sampler's threads too
    assert "process" in read and "threads" in read
    assert len(read) == len(set(read))  # every sample table read once, by all three
    assert phase_cuts.trace_phases(run) is phase_cuts.trace_phases(run)
    assert phase_cuts.trace_phases(run).steady is not None
    assert Run.open(run) is run and Run.open(RunFolder(cf98)) is not run


def test_an_analysis_is_kept_per_function_and_warmup(cf98: Path) -> None:
    """`per_run` keys the memo by the function and the warm-up: the same run opened with another warm-up
    shares what was read and computes its own phases; a bare folder is opened for the call."""
    run = Run.open(cf98)
    other = Run.open(run, 0)
    assert other.memo is run.memo and other.samples("process") is run.samples("process")
    assert summarise(other) is not summarise(run) and summarise(other) is summarise(Run.open(run, 0))
    assert summarise(run).warmup_epochs == 1 and summarise(other).warmup_epochs == 0
    assert run_contention(run) is run_contention(run)
    assert summarise(RunFolder(cf98)) == summarise(run)  # type: ignore[arg-type] - a test's bare folder


def test_what_was_run_and_its_ranks(cf98: Path) -> None:
    run = Run.open(cf98)
    assert isinstance(run.workload, BuiltinWorkload) and run.workload.spec.model == "alexnet"
    assert [(r.rank, r.world_size) for r in run.ranks] == [(0, 1)]
    assert not run.problems


def test_a_damaged_table_is_a_problem_and_the_rest_is_read(cf98: Path) -> None:
    gpu = _damage(cf98)
    run = Run.open(cf98)
    summary = summarise(run)
    assert summary.steady_images_per_s is not None and summary.peak_rss_mib is not None  # the rest is read
    assert summary.gpu_util_pct_mean is None
    (problem,) = run.problems
    assert isinstance(problem, Problem) and problem.file == str(gpu) and problem.what
    assert str(gpu) not in problem.what  # the file is named once, in `file`
    run.samples("gpu")
    assert len(run.problems) == 1  # met again: still one problem


def test_show_prints_a_damaged_table_as_a_problem_line(cf98: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gpu = _damage(cf98)
    assert main(["show", str(cf98)]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if str(gpu) in line]
    assert len(lines) == 1 and "is damaged" in lines[0], out
    assert "Problems" in out and "images/s" in out  # the rest of the run is shown
    assert str(gpu) not in err


def test_runs_prints_the_one_row_builder(cf98: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from analyzers.summaries.run_rows import RUN_COLUMNS, run_row

    row = run_row(Run.open(cf98))
    assert main(["runs", "--runs", str(cf98.parent)]) == 0
    out = capsys.readouterr().out
    shared = next(line for line in out.splitlines() if line.startswith("every run: "))
    table = next(line for line in out.splitlines() if line.startswith(row[0]))
    for column, cell in zip(RUN_COLUMNS, row):  # a lone run: its id and start in the table, the rest above it
        assert cell in table or f"{column.header} {cell or column.none}" in shared, (column, cell, out)
    assert "ok" in shared and "alexnet" in shared


def test_one_identity_key_for_the_run_its_summary_its_case_and_its_plan_cell(cf98: Path, tmp_path: Path) -> None:
    from tracer.campaign.plan import load_plan
    from tracer.core.cases import RunKey

    run = Run.open(cf98)
    key = run.key
    assert key == RunKey("pytorch", "alexnet", "big", "gpu", 100) == summarise(run).key == RunKey.of(run.record.spec)
    assert (run.case.model, run.case.dataset, run.case.device, run.case.batch) == (*astuple(key)[1:],)
    plan = tmp_path / "p.toml"
    plan.write_text('frameworks = ["pytorch"]\nmodels = ["alexnet"]\ndatasets = ["big"]\ndevices = ["gpu"]\n'
                    "batches = [100]\n")  # fmt: skip
    (cell,) = load_plan(plan).cells
    assert cell.key == key


def test_release_drops_the_tables_and_keeps_what_was_computed(cf98: Path) -> None:
    run = Run.open(cf98)
    summary, process = summarise(run), run.samples("process")
    held = inputs.load(run)
    assert process is not None and held.process is process
    run.release()  # what a consumer of many runs does after each one
    assert summarise(run) is summary
    assert inputs.load(run) is not held  # the diagnosis's inputs hold tables: dropped with them
    again = run.samples("process")
    assert again is not process and again is not None and again.equals(process)


def test_every_analysis_takes_a_run_not_a_folder() -> None:
    """Issue 51: above the run package every analysis is a function of a `Run` (the ingest writes folders, the
    trace layer below the run reads table files), and no part of a run is looked up by a name."""
    import re

    root = Path(__file__).resolve().parents[3] / "analyzers"
    below_or_writing = ("run", "ingest", "trace")
    typed = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in below_or_writing:
            continue
        text = path.read_text()
        typed += [f"{path.name}: {m.group(0)}" for m in re.finditer(r"\w+: (?:[\w\[]*)RunFolder\b", text)]
        assert "figures.parts" not in text and not re.search(r"\bpart\(\w+, \"", text), path
    assert typed == [], typed
