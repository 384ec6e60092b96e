"""`tracer show` analyses once (analyzers.report.shown) and prints the record: on a real traced H100 run, every
part it prints is in the record before a line is printed, and the terminal prints it as it always did."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from analyzers.figures.run_summary import summarise
from analyzers.report.shown import Diagnosis, diagnosis, repeats_of, shown
from analyzers.run.run import Run
from tracer.cli import main

CF98 = "gpu-h100/20261125-001043-pytorch-alexnet-big-gpu-b100-cf98"  # traced with nsys, 2 epochs


@pytest.fixture
def runs(real_fixtures: Path, tmp_path: Path) -> Path:
    """A folder of runs holding a writable copy of one real traced run (2 MB)."""
    shutil.copytree(real_fixtures / CF98, tmp_path / "runs" / Path(CF98).name)
    return tmp_path / "runs"


def test_the_record_holds_every_part_show_prints(runs: Path) -> None:
    run = Run.open(runs / Path(CF98).name)
    s = shown(run)
    assert s.summary is summarise(run) and s.summary.run_id == run.run_id
    assert s.step_parts is not None and s.step_parts.parts and s.step_parts.step_s
    assert [r.run_id for r in s.repeats] == [run.run_id] and s.repeat_summaries == ()  # a run alone
    assert s.straggler is None  # one rank
    assert not s.diagnosis.unavailable and s.diagnosis.cost is not None
    assert [v.rule for v in s.diagnosis.verdicts] == [v.rule for v in diagnosis(run).verdicts]
    assert [f.run_id for f in repeats_of(run)] == [run.run_id]


def test_show_prints_the_record(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", Path(CF98).name, "--runs", str(runs)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("steady step per image (") for line in lines)
    block = lines[lines.index("Diagnosis") :]
    assert block[1].startswith("  - ") and "Measurement cost" in block


def test_a_diagnosis_that_breaks_says_why() -> None:
    d = Diagnosis(unavailable="ValueError: no tables")
    assert d.verdicts == () and d.cost is None
