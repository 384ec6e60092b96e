"""One phase model (analyzers.figures.phases) for every view: the H100 fixtures' steady state is the epochs after
the warm-up on the CUDA split, the data-wait share, the diagnosis and the summary alike."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analyzers.diagnosis import load
from analyzers.diagnosis.inputs import steady_data_wait
from analyzers.figures import phase_cuts, phases
from analyzers.figures.run_summary import summarise
from analyzers.summaries import cuda_api
from analyzers.trace.tables import CUDA_API, NVTX
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder

CF98 = "gpu-h100/20261125-001043-pytorch-alexnet-big-gpu-b100-cf98"
P85CF = "gpu-h100/20261125-000159-pytorch-alexnet-big-gpu-b100-85cf"
STARTUP_ONLY = ("cuLibraryLoadData", "cuModuleLoadData")


def test_split_epochs() -> None:
    assert phases.split_epochs([3, 1, 2]) == phases.Split((1,), (2, 3), False)
    assert phases.split_epochs([1]) == phases.Split((), (1,), True)  # no epoch after the warm-up
    assert phases.split_epochs([1, 2], warmup=0) == phases.Split((), (1, 2), False)
    assert phases.split_epochs([]) == phases.Split((), (), False)
    with pytest.raises(ValueError):
        phases.split_epochs([1], warmup=-1)


def _sqlite_of(folder: Path) -> sqlite3.Connection:
    """The fixture's ingested CUDA API and NVTX tables copied into a plain SQLite database."""
    con = sqlite3.connect(":memory:")
    for name in (CUDA_API, NVTX):
        table = pq.read_table(folder / f"{name}.parquet", columns=["start_ns", "end_ns", "name"])
        con.execute(f"CREATE TABLE {name} (start_ns INTEGER, end_ns INTEGER, name TEXT)")
        con.executemany(f"INSERT INTO {name} VALUES (?, ?, ?)", zip(*(c.to_pylist() for c in table.columns)))
    return con


def test_steady_cuda_split_of_cf98_is_the_steady_nvtx_epoch(real_fixtures: Path) -> None:
    path = real_fixtures / CF98
    folder = RunFolder(path)
    split = cuda_api.phase_summaries(folder)
    steady = {r.name: r for r in split["steady"]}
    assert steady and not set(STARTUP_ONLY) & set(steady)  # start-up-only calls stay out of the steady state
    assert set(STARTUP_ONLY) <= {r.name for r in split["warmup"]}  # they happen in epoch 1 (lazy loading)
    con = _sqlite_of(path)
    calls, total = con.execute(
        f"SELECT count(*), sum(end_ns - start_ns) FROM {CUDA_API} "
        f"WHERE start_ns >= (SELECT start_ns FROM {NVTX} WHERE name = 'epoch 2') "
        f"AND start_ns < (SELECT end_ns FROM {NVTX} WHERE name = 'epoch 2')"
    ).fetchone()
    (epochs,) = con.execute(f"SELECT count(*) FROM {NVTX} WHERE name LIKE 'epoch %'").fetchone()
    con.close()
    assert epochs == 2  # epoch 1 is the warm-up, epoch 2 the steady state
    assert sum(r.calls for r in steady.values()) == calls == 16482
    assert sum(r.total_ns for r in steady.values()) == total
    cut = phase_cuts.trace_phases(folder).steady
    assert cut is not None and cut.label() == "steady state (epoch 2)" and cut.epochs == (2,)


def test_cli_analyze_steady_says_what_it_covers(real_fixtures: Path, tmp_path: Path) -> None:
    run = tmp_path / "cf98"
    shutil.copytree(real_fixtures / CF98, run)
    done = run_tracer("analyze", str(run), "--phase", "steady", "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["covers"] == "steady state (epoch 2)"
    names = {r["name"] for r in data["cuda_api"]}
    assert names and not set(STARTUP_ONLY) & names


def test_steady_data_wait_is_the_steady_share(real_fixtures: Path) -> None:
    """85cf waits 92-93 % of its steady steps; the all-epoch share (46.7 %) is not what stands beside
    steady images/s."""
    folder = RunFolder(real_fixtures / P85CF)
    s = summarise(folder)
    assert s.steady_data_wait_pct is not None and 90 < s.steady_data_wait_pct < 95
    assert s.whole.data_wait_pct is not None and s.whole.data_wait_pct < 50  # named for the whole run
    t = load(folder)
    assert [e.epoch for e in t.steady_epochs()] == [2, 3]
    wait = steady_data_wait(t)
    assert wait is not None and wait.share_pct == pytest.approx(s.steady_data_wait_pct)


def test_one_phase_model_for_the_diagnosis_and_the_trace(real_fixtures: Path) -> None:
    folder = RunFolder(real_fixtures / CF98)
    t = load(folder)
    assert [e.epoch for e in t.steady_epochs()] == list(phase_cuts.trace_phases(folder).split.steady) == [2]
    assert sum(r.calls for r in t.cuda_steady) == 16482
