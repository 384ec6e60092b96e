"""A campaign's epoch_times.csv is the report's Tables 1 and 2, written by the one table writer
(analyzers.report.tables.write_tables_csv): the same pools of repeats, the same filter, the same columns."""

from __future__ import annotations

import csv
from pathlib import Path

from analyzers.report import tables
from analyzers.report.runs import collect_runs
from tracer.cli.campaign import write_epoch_table


def test_epoch_table_is_tables_1_and_2(real_fixtures: Path, tmp_path: Path) -> None:
    runs, _ = collect_runs([real_fixtures / "gpu-h100"])
    path = write_epoch_table(list(runs), tmp_path / "epoch_times.csv")
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(tables.CSV_COLUMNS)
    table = tables.table_rows(runs, "cpu") + tables.table_rows(runs, "gpu")
    assert len(rows) == len(table) == 12  # one row per pool of repeats; the diverged run's row says so
    for row, twin in zip(rows, table):
        assert (row["framework"], row["model"], int(row["batch"]), row["settings"]) == (
            twin.framework, twin.model, twin.batch, twin.settings
        )  # fmt: skip
        assert row["steady_epoch_s"] == ("" if twin.steady_epoch_s is None else f"{twin.steady_epoch_s:.15g}")
    assert sum(1 for r in rows if r["steady_epoch_s"]) == 11  # 12 runs, the diverged one in no median
    b1 = [r for r in rows if r["model"] == "alexnet" and r["batch"] == "1"]
    assert sorted(r["settings"] for r in b1 if r["status"] == "ok") == [
        "1500 images, 224 px, 2 ep, workers 8",
        "300 images, 224 px, 2 ep, workers 8",
        "300 images, 224 px, 2 ep, workers 8, trace cupti, py-spy",
    ]
    (other,) = [r for r in b1 if r["status"] != "ok"]  # listed with its status, as in the report, in no median
    assert other["steady_epoch_s"] == "" and other["runs_ok"] == "0"
