"""A campaign's epoch_times.csv pools like with like, as the report's Table 2 does (analyzers.repeats.pool)."""

from __future__ import annotations

import csv
from pathlib import Path

from analyzers.report import tables
from analyzers.report.runs import collect_runs
from tracer.cli.campaign import EPOCH_TABLE_COLUMNS, write_epoch_table


def test_epoch_table_has_one_row_per_spec_and_agrees_with_table_2(shared_fixtures: Path, tmp_path: Path) -> None:
    runs, _ = collect_runs([shared_fixtures / "gpu-h100"])
    path = write_epoch_table([r.folder for r in runs], tmp_path / "epoch_times.csv")
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(EPOCH_TABLE_COLUMNS)
    table = {
        (r.framework, r.model, r.batch, r.settings): r
        for r in tables.table_rows(runs, "gpu")
        if r.steady_epoch_s is not None
    }
    assert len(rows) == len(table) == 11  # 12 runs, the diverged one in no median
    for row in rows:
        twin = table[(row["framework"], row["model"], int(row["batch"]), row["settings"])]
        assert float(row["steady_epoch_s"]) == round(twin.steady_epoch_s or 0, 4)
        assert int(row["runs"]) == twin.runs_ok == 1
    b1 = [r for r in rows if r["model"] == "alexnet" and r["batch"] == "1"]
    assert sorted(r["settings"] for r in b1) == [
        "1500 images, 224 px, 2 ep, workers 8",
        "300 images, 224 px, 2 ep, workers 8",
        "300 images, 224 px, 2 ep, workers 8, trace cupti, py-spy",
    ]
