"""analyzers.figures.steps: per-epoch data-wait share from a real run's steps table, and what show/compare print."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analyzers.comparison.compare import compare
from analyzers.figures import steps
from analyzers.figures.run_summary import summarise
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder
from tracer.core.schema import STEPS_TABLE


def test_shares_are_the_sums_of_the_rows(tiny_pytorch_run: RunFolder) -> None:
    rows = pq.read_table(tiny_pytorch_run.sample_parquet_path(STEPS_TABLE)).to_pylist()
    shares = steps.data_wait_shares(tiny_pytorch_run)
    assert sorted(shares) == sorted({r["epoch"] for r in rows})
    for epoch, share in shares.items():
        mine = [r for r in rows if r["epoch"] == epoch]
        wait = sum(r["data_wait_s"] for r in mine)
        total = sum(r["data_wait_s"] + r["compute_s"] + r["sync_s"] for r in mine)
        assert share == pytest.approx(wait / total)
    all_wait = sum(r["data_wait_s"] for r in rows)
    all_total = sum(r["data_wait_s"] + r["compute_s"] + r["sync_s"] for r in rows)
    assert steps.run_data_wait_share(tiny_pytorch_run) == pytest.approx(all_wait / all_total)
    summary = summarise(tiny_pytorch_run)
    assert summary.whole.data_wait_pct == pytest.approx(100 * all_wait / all_total)
    assert len(summary.data_wait_pct_by_epoch) == len(shares)


def test_run_without_a_steps_table_has_no_share(tiny_pytorch_run: RunFolder, tmp_path: Path) -> None:
    """Runs recorded before the table existed: '-' rather than an error."""
    old = RunFolder(tmp_path / tiny_pytorch_run.run_id)
    shutil.copytree(tiny_pytorch_run.path, old.path)
    old.sample_parquet_path(STEPS_TABLE).unlink()
    assert steps.epoch_splits(old) == [] and steps.run_data_wait_share(old) is None
    assert summarise(old).data_wait_pct is None
    diffs = {d.metric: d for d in compare([[old], [tiny_pytorch_run]]).differences}
    assert diffs["data-wait share of step time (whole run)"].a is None
    assert diffs["data-wait share of step time (steady)"].ratio(1) is None
    result = run_tracer("show", str(old.path))
    assert result.returncode == 0 and "data wait" in result.stdout


def test_show_prints_the_share_per_epoch(tiny_pytorch_run: RunFolder) -> None:
    result = run_tracer("show", str(tiny_pytorch_run.path))
    assert result.returncode == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if "data wait" in ln)
    # the header's %, the steady share, then one per epoch (the whole run's is on the line named for it)
    assert "per epoch" in line and line.count("%") == 1 + 1 + len(steps.data_wait_shares(tiny_pytorch_run))
    assert (
        line.split("(steady, % of step time)")[1]
        .strip()
        .startswith(f"{summarise(tiny_pytorch_run).steady.data_wait_pct:.0f} %")
    )
    whole = next(ln for ln in result.stdout.splitlines() if ln.startswith("whole run"))
    assert f"data-wait share of step time {summarise(tiny_pytorch_run).whole.data_wait_pct:.1f} %" in whole
