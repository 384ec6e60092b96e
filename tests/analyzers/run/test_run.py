"""`analyzers.run.Run`, the one loaded form of a run: its parts are read or computed once, what was run is
the record's typed workload, and a damaged file is a problem record beside the rest of the run, read."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest

from analyzers.figures import phases
from analyzers.run import Run, as_run
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
    trace_cuts = _count(monkeypatch, phases, "trace_phases")
    cuts = _count(monkeypatch, phases, "from_marks")  # every cut at epoch marks, on either clock
    assert main(["analyze", str(cf98), "--phase", "steady", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["covers"] == "steady state (epoch 2)" and data["cuda_api"] and data["kernels"]
    assert trace_cuts[0] == 1
    assert cuts[0] == 1


def test_parts_are_read_once_and_kept(cf98: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    real = RunFolder.samples

    def counted(self: RunFolder, name: str) -> Any:
        read.append(name)
        return real(self, name)

    monkeypatch.setattr(RunFolder, "samples", counted)
    run = Run.open(cf98)
    assert run.summary is run.summary
    assert run.diagnosis_inputs.process is run.samples("process")  # the diagnosis reads the same table
    run.view  # noqa: B018 - the viewer's part reads the sampler's threads too
    assert "process" in read and "threads" in read
    assert len(read) == len(set(read))  # every sample table read once, by all three
    assert run.trace_phases is run.trace_phases and run.trace_phases.steady is not None
    assert as_run(run) is run and as_run(RunFolder(cf98)) is not run


def test_what_was_run_and_its_ranks(cf98: Path) -> None:
    run = Run.open(cf98)
    assert isinstance(run.workload, BuiltinWorkload) and run.workload.spec.model == "alexnet"
    assert [(r.rank, r.world_size) for r in run.ranks] == [(0, 1)]
    assert not run.problems


def test_a_damaged_table_is_a_problem_and_the_rest_is_read(cf98: Path) -> None:
    gpu = _damage(cf98)
    run = Run.open(cf98)
    summary = run.summary
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
    from analyzers.run.run_rows import RUN_COLUMNS, run_row

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
    assert key == RunKey("pytorch", "alexnet", "big", "gpu", 100) == run.summary.key == RunKey.of(run.record.spec)
    assert (run.case.model, run.case.dataset, run.case.device, run.case.batch) == (*astuple(key)[1:],)
    plan = tmp_path / "p.toml"
    plan.write_text('frameworks = ["pytorch"]\nmodels = ["alexnet"]\ndatasets = ["big"]\ndevices = ["gpu"]\n'
                    "batches = [100]\n")  # fmt: skip
    (cell,) = load_plan(plan).cells
    assert cell.key == key


def test_release_drops_the_tables_and_keeps_what_was_computed(cf98: Path) -> None:
    run = Run.open(cf98)
    summary, process = run.summary, run.samples("process")
    assert process is not None and run.diagnosis_inputs.process is process
    run.release()  # what a consumer of many runs does after each one
    assert run.summary is summary
    again = run.samples("process")
    assert again is not process and again is not None and again.equals(process)
