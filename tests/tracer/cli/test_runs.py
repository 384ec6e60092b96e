"""`tracer runs` and `tracer show` on the H100 fixtures: load, GPU, learning and ranking (issue 24 items 1, 10, 11)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from analyzers.summaries.run_rows import NOT_RANKED
from tests.conftest import run_tracer
from tests.tracer.cli.test_output import _in_terminal
from tracer.core.runfolder import short_ids

H100 = "NVIDIA H100 80GB HBM3, driver 580.159.04, CUDA 13.0"


def _runs_table(stdout: str) -> tuple[list[str], list[dict[str, str]]]:
    """The `every run:` line's pairs and the table's rows as {header: cell}, read by the header's columns."""
    lines = stdout.splitlines()
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("─"))
    header = lines[rule - 1]
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=  ))\S", header)]  # columns are 2+ spaces apart
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
    rows = []
    for line in lines[rule + 1 :]:
        if not re.match(r"(\d{8}-\d{6}-\S+|[0-9a-f]{4}) ", line):
            break
        rows.append({n: line[a:b].strip() for n, a, b in zip(names, starts, [*starts[1:], None])})
    shared = next(ln for ln in lines if ln.startswith("every run: ")).removeprefix("every run: ").split("; ")
    return shared, rows


def test_runs_fills_load_and_gpu_and_marks_the_diverged_run(real_fixtures: Path) -> None:
    result = run_tracer("runs", "--runs", str(real_fixtures / "gpu-h100"))
    assert result.returncode == 0, result.stderr
    shared, rows = _runs_table(result.stdout)
    assert len(rows) == 12
    assert "GPU H100 80GB HBM3, 580.159.04, CUDA 13.0" in shared and "device gpu" in shared
    assert "data files" in shared and "image px 224" in shared  # what no run differs in: said once
    for cells in rows:
        assert cells["load"].endswith("% other"), cells  # quiet machine: the load is a number, not blank
        nan_run = cells["id"].endswith("3950")
        assert cells["img/s"].endswith(NOT_RANKED) == nan_run, cells
        assert (cells["status"] == "diverged") == nan_run, cells
        assert (cells["diverged"] == "epoch 2") == nan_run, cells
    by_id = {cells["id"][-4:]: cells for cells in rows}
    assert all(len(cells["id"]) > 40 for cells in rows)  # piped, the table is as wide as it needs: whole ids
    assert by_id["cf98"]["trace"] == "nsys" and by_id["a266"]["trace"] == "cupti" and by_id["85cf"]["trace"] == "none"
    assert by_id["a032"]["limit"] == "1500" and by_id["85cf"]["limit"] == "all"
    assert f"{NOT_RANKED} not ranked beside other runs" in result.stdout  # the mark is explained
    assert not [ln for ln in result.stdout.splitlines() if ln != ln.rstrip()]  # nothing padded


def test_every_command_takes_the_short_id_runs_shows(real_fixtures: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name in ("20261125-000310-pytorch-alexnet-big-gpu-b1-3950", "20261125-001153-pytorch-alexnet-big-gpu-b1-a032"):
        shutil.copytree(real_fixtures / "gpu-h100" / name, runs / name)
    _, rows = _runs_table(_in_terminal(["runs", "--runs", str(runs)], 80))  # too narrow for whole ids
    assert [r["id"] for r in rows] == ["3950", "a032"]
    for command in ("show", "diagnose", "analyze"):
        result = run_tracer(command, "3950", "--runs", str(runs))
        assert result.returncode == 0 and "a032" not in result.stdout, (command, result.stderr)
    assert short_ids(["x-1-abcd", "x-2-abcd"]) == {"x-1-abcd": "1-abcd", "x-2-abcd": "2-abcd"}
    assert short_ids(["imported-a", "imported-a-2"])["imported-a"] == "imported-a"  # a part of the other: whole


def test_show_prints_gpu_learning_memory_and_why_a_run_is_not_ranked(real_fixtures: Path) -> None:
    nan_run = run_tracer("show", str(real_fixtures / "gpu-h100/20261125-000310-pytorch-alexnet-big-gpu-b1-3950"))
    assert nan_run.returncode == 0, nan_run.stderr
    text = " ".join(nan_run.stdout.split())
    assert "diverged (loss nan at epoch 2" in text and "lr 0.001" in text
    assert "speed not ranked beside other runs: the run ended diverged" in text
    assert "last loss, accuracy loss nan" in text
    assert f"GPU {H100}" in text
    assert "NVML, the process: 1510 MiB; the framework's own: not recorded" in text
    healthy = run_tracer("show", str(real_fixtures / "gpu-h100/20261125-000159-pytorch-alexnet-big-gpu-b100-85cf"))
    text = " ".join(healthy.stdout.split())
    assert "not ranked" not in text and "last loss, accuracy loss 1.0" in text
