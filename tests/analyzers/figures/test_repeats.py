"""Pooling only like with like (analyzers.figures.repeats): on the H100 fixtures the batch-1 SimpleBig runs are
four specs (limit 6003/1500/300, a CUPTI + py-spy run), the diverged run pools into no median, and the
throughput figure's bars are the very pools of Table 2's rows."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from analyzers.figures.repeats import pool, repeat_key
from analyzers.report import tables
from analyzers.report.build import throughput_bars
from analyzers.report.charts import save, throughput_figure
from analyzers.report.runs import LoadedRun, by_case, collect_runs


@pytest.fixture(scope="module")
def h100(real_fixtures: Path) -> list[LoadedRun]:
    runs, warnings = collect_runs([real_fixtures / "gpu-h100"])
    assert not warnings and len(runs) >= 12
    return runs


def _case(runs: list[LoadedRun], model: str, batch: int) -> list[LoadedRun]:
    return next(g for c, g in by_case(runs).items() if c.model == model and c.batch == batch and c.device == "gpu")


def test_repeats_need_the_whole_spec(h100: list[LoadedRun]) -> None:
    record = next(r.record for r in h100 if r.run_id.endswith("6573"))
    same = dataclasses.replace(record, run_id="other")
    assert repeat_key(same) == repeat_key(record)
    for change in ({"trace": "cupti"}, {"pyspy": True}, {"limit": 1500}, {"workers": 4}, {"image_size": 112}):
        other = record.with_spec(dataclasses.replace(record.spec, **change))
        assert repeat_key(other) != repeat_key(record), change
    knob = dataclasses.replace(record, knobs={**record.knobs, "DataLoader.prefetch_factor": 4})
    assert repeat_key(knob) != repeat_key(record)
    labelled = record.with_spec(dataclasses.replace(record.spec, case=None, timeout_s=60))
    assert repeat_key(labelled) == repeat_key(record)  # a name and a time limit are not settings


def test_batch_one_figure_pools_only_identical_specs_and_agrees_with_table_2(
    h100: list[LoadedRun], tmp_path: Path
) -> None:
    group = _case(h100, "alexnet", 1)
    assert len(group) == 4  # 3950 (all 6003 images, diverged), a032 (1500), 6573 (300), e36e (300, CUPTI + py-spy)
    bars = throughput_bars(group)
    pools = tables.case_pools(group)
    rows = [r for r in tables.table_rows(h100, "gpu") if r.model == "alexnet" and r.batch == 1]
    assert len(bars) == len(pools) == len(rows) == 4
    by_id = {r.run_id: r for r in group}
    for bar, cp, row in zip(bars, pools, rows):
        keys = {repeat_key(by_id[i].record) for i in cp.pool.run_ids}
        assert len(keys) == 1  # one spec per pool
        assert bar.throughput == cp.pool.throughput
        rate = bar.throughput.images_per_s
        if rate is None:
            assert row.steady_images_per_s is None
            continue
        assert rate.n == row.runs_ok == 1
        assert (rate.median, rate.low, rate.high) == (
            row.steady_images_per_s,
            row.steady_images_per_s_min,
            row.steady_images_per_s_max,
        )
    diverged = next(cp for cp in pools if any(i.endswith("3950") for i in cp.pool.run_ids))
    assert not diverged.pool.counted and "diverged" in diverged.pool.left_out[0]
    cupti = next(b for b in bars if "trace cupti" in b.label)
    assert "py-spy" in cupti.label and cupti.throughput.images_per_s is not None
    assert cupti.throughput.images_per_s.median < 30  # the 8.9x slower run stands alone (26.2 images/s)
    files = save(throughput_figure("batch 1", bars, 1), tmp_path / "fig", ("png",))
    assert files[0].stat().st_size > 10_000


def test_traced_runs_of_one_case_are_rows_of_their_own(h100: list[LoadedRun]) -> None:
    """The batch-100 SimpleBig PyTorch runs: untraced, nsys, PyTorch profiler and CUPTI are four rows,
    not three repeats."""
    rows = [r for r in tables.table_rows(h100, "gpu") if r.model == "alexnet" and r.batch == 100]
    pytorch = [r for r in rows if r.framework == "pytorch"]
    assert len(pytorch) == 4 and all(r.runs_ok == 1 for r in pytorch)
    assert sorted(r.settings.rsplit("trace ", 1)[-1] for r in pytorch if "trace" in r.settings) == [
        "cupti",
        "nsys",
        "torch",
    ]


def test_pool_leaves_a_not_rankable_run_out(h100: list[LoadedRun]) -> None:
    group = _case(h100, "alexnet", 1)
    run = next(r for r in group if r.run_id.endswith("3950"))
    (p,) = pool([(run, run.record)])
    assert p.counted == () and p.throughput.images_per_s is None and p.run_ids == (run.run_id,)
