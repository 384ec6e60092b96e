"""`Run.rank(r)`: one rank of a run of several, read in memory from the run's own folder (issue 51): its
tables hold that rank's rows only, its samples are its own, what is computed on it is its own, and nothing
is written (no scratch copy of the run, in the folder or in TMPDIR)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analyzers.figures.phase_cuts import trace_phases
from analyzers.run.run import Run
from analyzers.summaries import kernels
from analyzers.timeline import chrome_trace
from analyzers.trace import tables as t
from tests.conftest import run_tracer
from tracer.core import schema
from tracer.core.errors import UserError
from tracer.core.runfolder import list_runs

TWO_RANKS = "param-dlrm-8rank"  # PARAM's DLRM: one Kineto trace per rank, imported as one run


@pytest.fixture(scope="module")
def ranked(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ranks 0 and 1 of PARAM's DLRM imported as one run, with an own sample table of rank 1's
    (`ranks/1/samples/`, as a `--nproc` run writes one per rank)."""
    out = tmp_path_factory.mktemp("ranked")
    traces = sorted((real_fixtures / TWO_RANKS).glob("worker[01]_*.json.gz"))
    result = run_tracer("import", "--out", str(out), *map(str, traces))
    assert result.returncode == 0, result.stderr
    (folder,) = list_runs(out)
    own = folder.path / schema.RANKS_DIR / "1" / schema.SAMPLES_DIR
    own.mkdir(parents=True)
    pq.write_table(t.empty(schema.PROCESS.schema), own / f"{schema.PROCESS.name}.parquet")
    return folder.path


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_a_rank_view_holds_that_ranks_rows_and_writes_nothing(
    ranked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again, as a fresh process reads it
    before = _files(ranked)

    run = Run.open(ranked)
    view = run.rank(1)
    assert view.only_rank == 1 and run.only_rank is None and view.path == run.path
    checked = 0
    for name in t.READ_SCHEMAS:
        whole = run.table(name)
        if whole is None or schema.RANK not in whole.column_names:
            continue
        mine = view.table(name)
        assert mine is not None and set(mine[schema.RANK].to_pylist()) <= {1}, name
        assert mine.num_rows == t.of_rank(whole, 1).num_rows < whole.num_rows, name
        assert view.table(name, ["start_ns"]) is not None
        checked += 1
    assert checked >= 4  # cuda_api, kernels, operators, nvtx ... each with both ranks' rows
    for name in (schema.STEPS_TABLE, schema.COLLECTIVES_TABLE):
        whole = run.samples(name)
        if whole is not None:
            mine = view.samples(name)
            assert mine is not None and mine.num_rows == t.of_rank(whole, 1).num_rows
            assert set(mine[schema.RANK].to_pylist()) <= {1}
    assert run.samples(schema.PROCESS.name) is None  # the run's own (rank 0's) has none
    assert view.samples(schema.PROCESS.name) is not None  # rank 1's own, from ranks/1/samples/

    # The analyses read the rank's rows; what a `per_run` analysis computes on the view is the view's own.
    whole_kernels = pq.read_table(run.table_path(t.KERNELS))
    rank_kernels = t.of_rank(whole_kernels, 1)
    rank_ns = pc.sum(pc.subtract(rank_kernels["end_ns"], rank_kernels["start_ns"])).as_py()
    assert sum(r.total_ns for r in kernels.kernel_summary(view)) == rank_ns
    assert sum(r.total_ns for r in kernels.kernel_summary(run)) > rank_ns
    assert trace_phases(view) is trace_phases(view) and view.memo is not run.memo
    assert view.read_record() == run.read_record() and view.problems is run.problems
    assert isinstance(view.table_file(t.KERNELS), pa.Buffer) and run.table_file(t.KERNELS) == run.table_path(t.KERNELS)
    assert Run.open(view, warmup=2).only_rank == 1

    # export-trace of the ranks: every rank's view, one after the other.
    assert {e["pid"] for e in chrome_trace.events(run) if e.get("cat") == "step"} == {
        chrome_trace.RANK_PID_BASE + r for r in (0, 1)
    }

    with pytest.raises(UserError, match="has no rank 9: its ranks are 0, 1"):
        run.rank(9)
    assert _files(ranked) == before
    assert list(scratch.iterdir()) == []
