"""Steady-state headline, contention and repeats, held against values computed from the run folders' files."""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

import pyarrow as pa
import pytest

from analyzers.figures.contention import CONTENDED_OTHER_CPU_PCT, contention
from analyzers.figures.repeats import group_repeats
from analyzers.figures.run_summary import summarise
from analyzers.figures.steady import epoch_stats, throughput
from tests.analyzers.report import _expected as x
from tests.conftest import TINY, run_tracer
from tracer.core.runfolder import RunFolder, list_runs


def test_steady_state_leaves_the_warm_up_out(tiny_pytorch_run: RunFolder) -> None:
    run = tiny_pytorch_run.path
    stats = epoch_stats(tiny_pytorch_run.epochs())
    assert (stats.epochs, stats.warmup, stats.steady_epochs, stats.includes_warmup) == (2, 1, 1, False)
    assert stats.steady_epoch_s == pytest.approx(x.steady_epoch_s(run), rel=1e-12)
    assert stats.steady_images_per_s == pytest.approx(x.steady_images_per_s(run), rel=1e-12)
    assert stats.first_epoch_s == pytest.approx(x.first_epoch_s(run), rel=1e-12)
    whole = epoch_stats(tiny_pytorch_run.epochs(), warmup=0)
    assert whole.steady_epoch_s == pytest.approx(x.mean_epoch_s(run), rel=1e-12)


def test_a_run_with_no_epoch_after_its_warm_up_counts_all_and_says_so(tiny_pytorch_run: RunFolder) -> None:
    stats = epoch_stats(tiny_pytorch_run.epochs(), warmup=5)
    assert stats.includes_warmup and stats.steady_epochs == 2 and stats.warmup == 0
    assert stats.steady_epoch_s == pytest.approx(x.mean_epoch_s(tiny_pytorch_run.path), rel=1e-12)


def test_table1_cell_is_the_median_of_per_run_steady_states(tiny_pytorch_run: RunFolder) -> None:
    epochs = tiny_pytorch_run.epochs()
    short = epochs[:1]  # a one-epoch run: its only epoch is all it has
    cell = throughput([epochs, epochs, short])
    per_run = [x.steady_epoch_s(tiny_pytorch_run.path)] * 2 + [short[0].duration_s]
    assert cell.runs == 3 and cell.includes_warmup
    assert cell.epoch_s is not None
    assert cell.epoch_s.median == pytest.approx(statistics.median(per_run), rel=1e-12)
    assert (cell.epoch_s.low, cell.epoch_s.high) == pytest.approx((min(per_run), max(per_run)), rel=1e-12)


def test_contention_is_the_machine_minus_the_training(tiny_pytorch_run: RunFolder) -> None:
    run = tiny_pytorch_run.path
    other = [
        max(0.0, m - o)
        for m, o in zip(x.process_column(run, "sys_cpu_pct"), x.process_column(run, "cpu_pct"), strict=True)
    ]
    load = contention(tiny_pytorch_run.samples("process"))
    assert load.other_cpu_pct == pytest.approx(statistics.median(other), rel=1e-12)
    assert load.contended == (statistics.median(other) >= CONTENDED_OTHER_CPU_PCT)
    assert summarise(tiny_pytorch_run).contended == load.contended
    shown = run_tracer("show", str(run))
    assert shown.returncode == 0
    warnings = [ln for ln in shown.stdout.splitlines() if ln.startswith("warning: contended")]
    assert len(warnings) == int(load.contended)


def test_contention_threshold_both_ways() -> None:
    """Samples as the sampler writes them: a quiet machine, and one where others hold half the CPU."""
    quiet = pa.table({"cpu_pct": [40.0, 50.0, 45.0], "sys_cpu_pct": [45.0, 55.0, 52.0]})
    busy = pa.table({"cpu_pct": [40.0, 50.0, 45.0], "sys_cpu_pct": [95.0, 100.0, 97.0]})
    assert not contention(quiet).contended and contention(quiet).warning() == ""
    assert contention(busy).contended and contention(busy).other_cpu_pct == pytest.approx(52.0)
    assert "52 %" in contention(busy).warning()
    assert contention(None).other_cpu_pct is None


def test_runs_of_one_spec_are_one_group(tiny_pytorch_run: RunFolder, tmp_path: Path) -> None:
    copy = tmp_path / (tiny_pytorch_run.run_id + "-again")
    shutil.copytree(tiny_pytorch_run.path, copy)
    groups = group_repeats([tiny_pytorch_run, RunFolder(copy)])
    assert [len(g) for g in groups] == [2]


def test_profile_repeat_makes_n_runs_and_prints_their_spread(tmp_path: Path) -> None:
    from tests.conftest import require_framework

    require_framework("pytorch")
    out = tmp_path / "runs"
    result = run_tracer("profile", "--framework", "pytorch", "--model", "alexnet", *TINY, "--limit", "4",
                        "--repeat", "2", "--out", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    runs = list_runs(out)
    assert len(runs) == 2 and [len(g) for g in group_repeats(runs)] == [2]
    rates = [summarise(r).steady_images_per_s for r in runs]
    assert "over the repeats" in result.stdout
    assert f"{statistics.median(r for r in rates if r is not None):.1f}" in result.stdout
    shown = run_tracer("show", str(runs[0].path))
    assert "2 runs of one spec" in shown.stdout


def test_repeat_zero_is_refused(tmp_path: Path) -> None:
    result = run_tracer("profile", "--framework", "pytorch", "--model", "alexnet", "--repeat", "0", "--out",
                        str(tmp_path))  # fmt: skip
    assert result.returncode == 2 and "--repeat must be 1 or more" in result.stderr
