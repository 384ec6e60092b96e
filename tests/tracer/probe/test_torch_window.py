"""`tracer profile --trace torch -- COMMAND` (issue 52 item 4): the probe runs the PyTorch profiler in the
script's processes over the trace window, and the run gets the operator table the built-in workload
gets. Held to the script's own truth (tests/tracer/probe/scripts/torch_window_loop.py prints each step's
wall-clock span and makes one `aten::linear` a step): the table holds the window's steps and no others."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analyzers.trace import tables as t
from tests.conftest import require_framework, run_tracer
from tracer.core.runfolder import RunFolder, list_runs
from tracer.core.schema import RANK, TORCH_RANK_TRACE, TORCH_TRACE
from tracer.measure.environments import status

SCRIPT = Path(__file__).resolve().parent / "scripts" / "torch_window_loop.py"
LINEAR = "aten::linear"


def _truths(folder: RunFolder) -> dict[int, dict]:  # type: ignore[type-arg]
    """Each rank's printed truth, by rank."""
    lines = (folder.path / "raw" / "stdout.log").read_text().splitlines()
    found = [json.loads(line) for line in lines if line.startswith("{")]
    return {int(d["rank"]): d for d in found}


def _span(truth: dict, epoch: int, first: int, last: int) -> tuple[int, int]:  # type: ignore[type-arg]
    """From the script's asking for step `first`'s batch to its asking for the batch after step `last`."""
    steps = {(s["epoch"], s["step"]): s for s in truth["steps"]}
    after = steps.get((epoch, last + 1))
    return steps[(epoch, first)]["start_ns"], (after["start_ns"] if after else steps[(epoch, last)]["end_ns"])


def _profile(out: Path, window: str, *command: str) -> tuple[RunFolder, str]:
    """`window` '' for none given (the whole run)."""
    given = ("--trace-window", window) if window else ()
    result = run_tracer("profile", "--out", str(out), "--trace", "torch", *given, "--", *command)
    assert result.returncode == 0, result.stderr[-3000:]
    (folder,) = list_runs(out)
    return folder, result.stderr


def test_a_plain_dataloader_loop_gets_the_operators_of_its_window_steps_only(tmp_path: Path) -> None:
    require_framework("pytorch")
    folder, said = _profile(tmp_path / "runs", "2:2-4", status("pytorch").python, str(SCRIPT))
    assert f"raw/{TORCH_TRACE}" in folder.read_record().trace_files
    assert "operators" in said and "window: epoch 2 steps 2-4" in said
    ops = pq.read_table(folder.table_path(t.OPERATORS))
    assert ops.num_rows > 0
    names = Counter(ops["name"].to_pylist())
    truth = _truths(folder)[0]
    assert names[LINEAR] == 3 * truth["linear_per_step"]  # steps 2, 3 and 4: no step before or after
    start, end = _span(truth, 2, 2, 4)
    assert start <= min(ops["start_ns"].to_pylist()) and max(ops["end_ns"].to_pylist()) <= end
    meta = json.loads((folder.path / t.TRACE_META).read_text())
    assert meta["kineto"][t.WINDOW_FACT] == "2:2-4"
    # The steps table is the script's, every step of every epoch, whatever was traced.
    steps = folder.samples("steps")
    assert steps is not None and steps.num_rows == len(truth["steps"])


def test_without_a_window_every_step_is_traced_from_the_first(tmp_path: Path) -> None:
    require_framework("pytorch")
    folder, _ = _profile(tmp_path / "runs", "", status("pytorch").python, str(SCRIPT))
    truth = _truths(folder)[0]
    ops = pq.read_table(folder.table_path(t.OPERATORS))
    names = Counter(ops["name"].to_pylist())
    assert names[LINEAR] == len(truth["steps"]) * truth["linear_per_step"]
    # From the first pass over the loader, not from the import: the data and the model made before are not in it.
    assert names["aten::randn"] == 0 and names["aten::uniform_"] == 0, names


def test_each_rank_of_a_torchrun_job_writes_its_own_trace(tmp_path: Path) -> None:
    require_framework("pytorch")
    torchrun = str(Path(status("pytorch").python).parent / "torchrun")
    command = (torchrun, "--nproc-per-node", "2", str(SCRIPT), "--epochs", "2")
    folder, _ = _profile(tmp_path / "runs", "2:1-2", *command)
    files = folder.read_record().trace_files
    assert {f"raw/{TORCH_RANK_TRACE % r}" for r in (0, 1)} <= set(files), files
    ops = pq.read_table(folder.table_path(t.OPERATORS))
    truths = _truths(folder)
    for rank in (0, 1):
        mine = ops.filter(pc.equal(ops[RANK], rank))
        assert Counter(mine["name"].to_pylist())[LINEAR] == 2 * truths[rank]["linear_per_step"]


@pytest.mark.parametrize("trace", ["nsys", "cupti"])
def test_a_window_beside_a_command_is_the_profilers_alone(trace: str, tmp_path: Path) -> None:
    result = run_tracer(
        "profile", "--out", str(tmp_path), "--trace", trace, "--trace-window", "2", "--", "python", "x.py"
    )
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
    assert "--trace" in result.stderr
